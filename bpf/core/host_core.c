// SPDX-License-Identifier: GPL-2.0
/*
 * host_core.c - compiles the controllers' arithmetic cores for the host, so
 * that the Rust unit tests run exactly the code the BPF objects inline, and
 * emits the tunable descriptor tables from the X-macros in ccload_intf.h.
 * Built by loader/build.rs with the `cc` crate.
 */
#include "ccl_core.h"
#include "ccpd_core.h"
#include "hetcp_core.h"
#include "ctcp_core.h"
#include "ubl_core.h"
#include "agg_core.h"

#define CCL_PARAM_DESC(field, name, scale, def, lo, hi, unit, help) \
	{ #field, name, scale, def, lo, hi, unit, help },
#define CCL_DESC_TABLE(algo, TABLE)                                      \
	const struct ccl_param_desc ccl_##algo##_param_desc[] = { TABLE( \
		CCL_PARAM_DESC) CCL_TEST_PARAMS(CCL_PARAM_DESC) };       \
	const u32 ccl_##algo##_param_count =                             \
		sizeof(ccl_##algo##_param_desc) / sizeof(ccl_##algo##_param_desc[0]);

#define CCL_HOST_PARAM_TABLE(name, NAME, tel) CCL_DESC_TABLE(name, CCL_##NAME##_PARAMS)
CCL_ALGOS(CCL_HOST_PARAM_TABLE)

#define CCL_HOST_PURPOSE(name, NAME, tel) const char ccl_##name##_purpose[] = CCL_##NAME##_PURPOSE;
CCL_ALGOS(CCL_HOST_PURPOSE)

#include <stddef.h>

#define CCL_TEL_DESC(member, type, field, unit, help)               \
	{ #field,	unit,                                       \
	  help,		offsetof(struct ccl_event, u.member.field), \
	  sizeof(type), (type)-1 < (type)0 },
#define CCL_TEL_TABLE(algo, member, TABLE)                                            \
	const struct ccl_tel_desc ccl_##algo##_tel_desc[] = { TABLE(member##_DESC) }; \
	const u32 ccl_##algo##_tel_count =                                            \
		sizeof(ccl_##algo##_tel_desc) / sizeof(ccl_##algo##_tel_desc[0]);

/* The row macro must bind the union member, which the preprocessor cannot
 * do inside one expansion: each controller has one <tel>_DESC line. */
#define ccpd_DESC(type, field, unit, help) CCL_TEL_DESC(ccpd, type, field, unit, help)
#define hetcp_DESC(type, field, unit, help) CCL_TEL_DESC(hetcp, type, field, unit, help)
#define ctcp_DESC(type, field, unit, help) CCL_TEL_DESC(ctcp, type, field, unit, help)
#define ubl_DESC(type, field, unit, help) CCL_TEL_DESC(ubl, type, field, unit, help)

#define CCL_HOST_TEL_TABLE(name, NAME, tel) CCL_TEL_TABLE(name, tel, CCL_TEL_##NAME)
CCL_ALGOS(CCL_HOST_TEL_TABLE)

/* The aggregate counters and histograms (ccload_intf.h), in enum order. */
#define CCL_AGG_DESC(name, unit, help) { #name, unit, help },
const struct ccl_agg_desc ccl_agg_counter_desc[] = { CCL_AGG_COUNTERS(CCL_AGG_DESC) };
const struct ccl_agg_desc ccl_agg_hist_desc[] = { CCL_AGG_HISTS(CCL_AGG_DESC) };
