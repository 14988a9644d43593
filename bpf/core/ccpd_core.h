/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccpd_core.h - CCPD arithmetic core (ALGORITHMS.md 1.4 E4, 1.5 C7/C8).
 *
 * Pure functions on integers, shared by bpf/ccpd.bpf.c and the host unit tests
 * (loader/src/core_tests.rs), which compare them with an f64 model of the
 * paper's Eq. 3-6.  Units: windows and buffer quantities in segments x 1024
 * (Q10), rates in segments/s, times in us (RTT) or ms (Kd).
 */
#ifndef __CCPD_CORE_H
#define __CCPD_CORE_H

#include "ccl_core.h"

/* Estimates of E4, all segments x 1024. */
struct ccpd_est {
	u32 p_q10; /* pipe: C * rtt_min                       */
	u32 b_q10; /* buffer: max(C * (rtt_max - rtt_min), b_min) */
	u32 x_q10; /* buffer level: C * max(0, rtts - rtt_min)   */
};

/* Inputs and outputs of one step of the window law. */
struct ccpd_law {
	/* in */
	u32 w_q10;	 /* current CCPD window, segments x 1024 */
	u32 rtt_min_us;	 /* m */
	u32 rtts_us;	 /* s, own smoothed RTT */
	u32 in_flight;	 /* segments (L0's F_k) */
	u32 kp_q10;	 /* Kp x 1024 */
	u32 g_q10;	 /* Kd/dt x 1024, already clamped to g_max */
	u32 gamma_q10;	 /* L1 smoothing gain x 1024 */
	u32 cwnd_min;	 /* segments */
	u32 cwnd_max;	 /* segments */
	u32 e_valid;	 /* e_prev_q10 holds the previous round's error */
	s32 e_prev_q10;	 /* previous error, segments x 1024 */
	s32 dterm_in_q10; /* L0: derivative term in force between round starts */
	struct ccpd_est est;
	/* out */
	u32 d_q10;	  /* L1: own queued segments w(s-m)/s; L0: F = in flight */
	s32 e_q10;	  /* E = B - x - d */
	s32 dterm_q10;	  /* D */
	s32 delta_q10;	  /* L1: Kp*E - d + D */
	u32 w_out_q10;	  /* new window, segments x 1024 */
};

/*
 * Eq. 4-6 with C from E4:
 *   P = C * rtt_min,  B = C * (rtt_max - rtt_min) (>= b_min),
 *   x = C * (rtts - rtt_min)
 */
CCL_CORE void ccpd_estimate(u32 c_sps, u32 rtt_min_us, u32 rtt_max_us, u32 rtts_us,
			    u32 b_min, struct ccpd_est *e)
{
	u32 qmax = rtt_max_us > rtt_min_us ? rtt_max_us - rtt_min_us : 0;
	u32 qnow = rtts_us > rtt_min_us ? rtts_us - rtt_min_us : 0;

	e->p_q10 = ccl_sat32(ccl_segs_q10(c_sps, rtt_min_us));
	e->b_q10 = ccl_sat32(ccl_max64(ccl_segs_q10(c_sps, qmax), (u64)b_min << 10));
	e->x_q10 = ccl_sat32(ccl_segs_q10(c_sps, qnow));
}

/* gamma = 1.5 / (1 + 2 Kp): 3/4 of the per-round stability bound 2/(1+2Kp). */
CCL_CORE u32 ccpd_gamma_auto_q10(u32 kp_q10)
{
	return (u32)(1536ULL * 1024 / (1024 + 2 * (u64)kp_q10));
}

/* g = Kd / (t_k - t_{k-1}) with Kd in ms and dt the round duration, clamped. */
CCL_CORE u32 ccpd_gain_q10(u32 kd_ms, u32 dt_us, u32 g_max_q10)
{
	u64 g;

	if (!kd_ms)
		return 0;
	if (!dt_us)
		return g_max_q10;
	g = (u64)kd_ms * 1000 * 1024 / dt_us;
	return (u32)ccl_min64(g, g_max_q10);
}

/* D = g * (E_k - E_{k-1}), bounded by +-(P + B)/2 so one noisy round cannot
 * move the window by more than half the path storage. */
CCL_CORE s32 ccpd_dterm_q10(u32 g_q10, s64 e_q10, s64 e_prev_q10, const struct ccpd_est *e)
{
	s64 lim = ((s64)e->p_q10 + e->b_q10) / 2;
	s64 d = ccl_smul_q10(e_q10 - e_prev_q10, g_q10);

	return (s32)ccl_smax(ccl_smin(d, lim), -lim);
}

CCL_CORE u32 ccpd_clamp_w_q10(s64 w, u32 cwnd_min, u32 cwnd_max)
{
	s64 lo = (s64)cwnd_min << 10, hi = (s64)ccl_max64(cwnd_max, cwnd_min) << 10;

	return (u32)ccl_smax(ccl_smin(w, hi), lo);
}

/*
 * Mode L1, once per round (ALGORITHMS.md 1.1 resolution 2, 1.5 C7):
 *   d      = w (s - m) / s                      own segments in the buffer
 *   E      = B - x - d
 *   D      = g (E_k - E_{k-1})
 *   target = w m / s + Kp (B - x - d) + D
 *   w'     = w + gamma (target - w) = w + gamma (Kp E - d + D)
 */
CCL_CORE void ccpd_law_l1(struct ccpd_law *l)
{
	u32 m = l->rtt_min_us, s = l->rtts_us > m ? l->rtts_us : m;
	/* queueing delay capped at 10 s: w_q10 < 2^32 times < 2^24 fits u64 */
	u64 q = ccl_min64(s - m, 10000000);
	s64 e, delta, w;

	l->d_q10 = s ? (u32)((u64)l->w_q10 * q / s) : 0;
	e = (s64)l->est.b_q10 - l->est.x_q10 - l->d_q10;
	l->dterm_q10 = l->e_valid ? ccpd_dterm_q10(l->g_q10, e, l->e_prev_q10, &l->est) : 0;
	delta = ccl_smul_q10(e, l->kp_q10) - l->d_q10 + l->dterm_q10;
	w = (s64)l->w_q10 + ccl_smul_q10(delta, l->gamma_q10);

	l->e_q10 = (s32)e;
	l->delta_q10 = (s32)ccl_smax(ccl_smin(delta, 0x7fffffff), -0x7fffffff);
	l->w_out_q10 = ccpd_clamp_w_q10(w, l->cwnd_min, l->cwnd_max);
}

/*
 * Mode L0, every ACK, the paper's Eq. 3 literally (F_k = packets in flight):
 *   w_k = Kp (B - x_k - F_k) + Kd/(t_k - t_{k-1}) ((x_{k-1} + F_{k-1}) - (x_k + F_k))
 * The derivative term is refreshed at round starts (`round_start`), with
 * E = B - x - F so that E_k - E_{k-1} = (x+F)_{k-1} - (x+F)_k, and held between.
 */
CCL_CORE void ccpd_law_l0(struct ccpd_law *l, u32 round_start)
{
	s64 e, w;

	l->d_q10 = l->in_flight << 10;
	e = (s64)l->est.b_q10 - l->est.x_q10 - l->d_q10;
	if (round_start)
		l->dterm_q10 = l->e_valid ? ccpd_dterm_q10(l->g_q10, e, l->e_prev_q10, &l->est) : 0;
	else
		l->dterm_q10 = l->dterm_in_q10;
	w = ccl_smul_q10(e, l->kp_q10) + l->dterm_q10;

	l->e_q10 = (s32)e;
	l->delta_q10 = 0;
	l->w_out_q10 = ccpd_clamp_w_q10(w, l->cwnd_min, l->cwnd_max);
}

#endif /* __CCPD_CORE_H */
