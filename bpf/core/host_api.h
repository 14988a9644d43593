/* SPDX-License-Identifier: GPL-2.0 */
/* host_api.h - what bindgen turns into loader's `intf` module: the shared
 * layouts, the arithmetic cores and the tunable descriptor tables. */
#include "../ccload_intf.h"
#include "ccl_core.h"
#include "ccpd_core.h"
#include "hetcp_core.h"
#include "ctcp_core.h"
#include "ubl_core.h"

extern const struct ccl_param_desc ccl_ccpd_param_desc[];
extern const u32 ccl_ccpd_param_count;
extern const struct ccl_param_desc ccl_hetcp_param_desc[];
extern const u32 ccl_hetcp_param_count;
extern const struct ccl_param_desc ccl_ctcp_plus_param_desc[];
extern const u32 ccl_ctcp_plus_param_count;
extern const struct ccl_param_desc ccl_ub_reno_param_desc[];
extern const u32 ccl_ub_reno_param_count;

extern const struct ccl_tel_desc ccl_ccpd_tel_desc[];
extern const u32 ccl_ccpd_tel_count;
extern const struct ccl_tel_desc ccl_hetcp_tel_desc[];
extern const u32 ccl_hetcp_tel_count;
extern const struct ccl_tel_desc ccl_ctcp_plus_tel_desc[];
extern const u32 ccl_ctcp_plus_tel_count;
extern const struct ccl_tel_desc ccl_ub_reno_tel_desc[];
extern const u32 ccl_ub_reno_tel_count;
