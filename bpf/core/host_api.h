/* SPDX-License-Identifier: GPL-2.0 */
/* host_api.h - what bindgen turns into crate ccload-intf (bpf/intf): the shared
 * layouts, the arithmetic cores and the tunable descriptor tables. */
#include "../ccload_intf.h"
#include "ccl_core.h"
#include "ccpd_core.h"
#include "hetcp_core.h"
#include "ctcp_core.h"
#include "ubl_core.h"
#include "agg_core.h"

/* Per CCL_ALGOS row: the tunable and telemetry descriptor tables, and the
 * one-line purpose. */
#define CCL_HOST_DECLS(name, NAME, tel)                               \
	extern const struct ccl_param_desc ccl_##name##_param_desc[]; \
	extern const u32 ccl_##name##_param_count;                    \
	extern const struct ccl_tel_desc ccl_##name##_tel_desc[];     \
	extern const u32 ccl_##name##_tel_count;                      \
	extern const char ccl_##name##_purpose[];
CCL_ALGOS(CCL_HOST_DECLS)

/* The aggregate descriptor tables, CCL_AGG_NR_COUNTERS and CCL_AGG_NR_HISTS
 * entries. */
extern const struct ccl_agg_desc ccl_agg_counter_desc[];
extern const struct ccl_agg_desc ccl_agg_hist_desc[];
