/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ubl_core.h - arithmetic core of the Hyun & Jang under-buffered-link scheme
 * (docs/ub_reno.md): the LSRTT estimator, C(t), the per-round
 * extra-window law (Eq. 4), Reno's own window and the loss rule.
 * Pure integer functions shared by bpf/ub_reno.bpf.c and the host unit tests
 * (bpf/core-tests/src/core_tests.rs).  Windows in segments, RTTs in us, ratios Q16.
 */
#ifndef __UBL_CORE_H
#define __UBL_CORE_H

#include "ccl_core.h"

/*
 * LSRTT state (48 bytes).  Mean and deviation in us x 8 (Q3); the CUSUM
 * statistics too.  During warm-up sp_sum holds the plain sum.
 */
struct ubl_ls {
	u64 sp_sum, sn_sum; /* samples since the candidate change point, us */
	u32 mu_q3, dev_q3;  /* level estimate and mean absolute deviation */
	u32 gp_q3, gn_q3;   /* two-sided Page CUSUM statistics */
	u32 sp_cnt, sn_cnt, n;
	u16 det_up, det_dn; /* level shifts detected (wrap) */
};

/*
 * One RTT sample r (us).  Two-sided Page CUSUM for a mean shift of
 * delta = 2 nu with drift nu and threshold h:
 *   g+ = max(0, g+ + (r - mu) - nu)     g- = max(0, g- - (r - mu) - nu)
 *   g+ > h or g- > h: a level shift; mu := mean of the samples since the
 *                     statistic last left 0 (the estimated change point)
 *   else              mu += (r - mu) / 2^shift,  dev += (|r - mu| - dev) / 4
 * nu = max(mu / 2^nu_shift, nu_min), h = h_mult * max(dev, dev_min).
 * Returns LSRTT in us.
 */
CCL_CORE u32 ubl_lsrtt(struct ubl_ls *s, u32 r, const struct ccl_ub_reno_params *p)
{
	s64 r3 = (s64)r << 3, e3, nu3, h3, gp, gn;
	u64 dev;

	/* L0: plain mean while warming up. */
	if (s->n < p->ls_warm) {
		s->sp_sum += r;
		s->n++;
		s->mu_q3 = (u32)((s->sp_sum << 3) / s->n);
		if (s->n == p->ls_warm)
			s->sp_sum = 0;
		return s->mu_q3 >> 3;
	}
	/* Error against the level, CUSUM drift nu and threshold h. */
	e3 = r3 - s->mu_q3;
	nu3 = ccl_smax(s->mu_q3 >> p->ls_nu_shift, (s64)p->ls_nu_min_us << 3);
	h3 = (s64)p->ls_h_mult * ccl_smax(s->dev_q3, (s64)p->ls_dev_min_us << 3);
	/* The two Page statistics, and the samples since each left 0. */
	gp = ccl_smax(0, (s64)s->gp_q3 + e3 - nu3);
	gn = ccl_smax(0, (s64)s->gn_q3 - e3 - nu3);
	s->gp_q3 = (u32)ccl_smin(gp, CCL_U32_MAX);
	s->gn_q3 = (u32)ccl_smin(gn, CCL_U32_MAX);
	if (gp) {
		s->sp_sum += r;
		s->sp_cnt++;
	} else {
		s->sp_sum = 0;
		s->sp_cnt = 0;
	}
	if (gn) {
		s->sn_sum += r;
		s->sn_cnt++;
	} else {
		s->sn_sum = 0;
		s->sn_cnt = 0;
	}
	/* A level shift re-estimates the level from the samples since the change point. */
	if (gp > h3 && s->sp_cnt) {
		s->mu_q3 = (u32)((s->sp_sum << 3) / s->sp_cnt);
		s->det_up++;
	} else if (gn > h3 && s->sn_cnt) {
		s->mu_q3 = (u32)((s->sn_sum << 3) / s->sn_cnt);
		s->det_dn++;
	} else {
		s->mu_q3 = (u32)((s64)s->mu_q3 + (e3 >> p->ls_shift));
		dev = e3 < 0 ? (u64)(-e3) : (u64)e3;
		s->dev_q3 = (u32)((s64)s->dev_q3 + (((s64)dev - s->dev_q3) >> 2));
		return s->mu_q3 >> 3;
	}
	s->gp_q3 = s->gn_q3 = 0;
	s->sp_sum = s->sn_sum = 0;
	s->sp_cnt = s->sn_cnt = 0;
	return s->mu_q3 >> 3;
}

/* C(t) = LSRTT / RTT_min, Q16 (0 without a min RTT). */
CCL_CORE u32 ubl_c_q16(u32 lsrtt_us, u32 rtt_min_us)
{
	if (!rtt_min_us || rtt_min_us == CCL_U32_MAX)
		return 0;
	return ccl_sat32(((u64)lsrtt_us << 16) / rtt_min_us);
}

/* The window state the law reads and writes. */
struct ubl_win {
	u32 cwnd_r;	/* Reno's own window, segments */
	u32 cwnd_cnt;	/* its AI counter */
	u32 extra;	/* extra window, segments */
	u32 wfull_prev; /* W_full^{i-1} */
	u32 wfull_cur;	/* W_full^i measured in this cycle */
	u32 clear_max;	/* largest cwnd_p judged not over alpha since the last round that was */
	u16 cycle;	/* CA cycle index i (wraps; telemetry only) */
	u16 ramp_q16;	/* fractional extra growth during RAMP (< 1 segment) */
	u8 found;	/* t* seen in this cycle */
	u8 phase;	/* CCL_PHASE_RAMP / HOLD / ZERO */
	u8 settle;	/* skip judging C(t) at the next round end */
	u8 c_over;	/* judged rounds in a row with C > alpha */
};

/*
 * Per ACK while cwnd-limited: Reno on cwnd_r, as the kernel's
 * tcp_reno_cong_avoid on snd_cwnd (tcp_slow_start below ssthresh, what it
 * leaves of acked to tcp_cong_avoid_ai: +1/cwnd_r per segment), so that
 * with no extra window (ZERO) the flow is Reno exactly.  In HOLD the extra window shrinks as cwnd_r
 * grows, keeping cwnd_p = W_full^{i-1}:  extra = W_full^{i-1} - cwnd.
 * In RAMP cwnd_p grows by (a - 1) per acknowledged segment, which is
 * cwnd_p(t+1) = a * cwnd_p(t) per round (as slow start is 2x per round for
 * +1 per segment) but spread over the round's ACKs instead of one burst at
 * its start; capped at W_full^{i-1}.
 */
CCL_CORE void ubl_ack(struct ubl_win *w, u32 acked, u32 ssthresh,
		      const struct ccl_ub_reno_params *p)
{
	if (w->cwnd_r < ssthresh) {
		u32 room = ssthresh - w->cwnd_r;
		u32 ss = acked < room ? acked : room;

		w->cwnd_r += ss;
		acked -= ss;
	}
	if (acked && w->cwnd_r) {
		if (w->cwnd_cnt >= w->cwnd_r) { /* the window shrank under the count */
			w->cwnd_cnt = 0;
			w->cwnd_r++;
		}
		w->cwnd_cnt += acked;
		if (w->cwnd_cnt >= w->cwnd_r) {
			u32 delta = w->cwnd_cnt / w->cwnd_r;

			w->cwnd_cnt -= delta * w->cwnd_r;
			w->cwnd_r += delta;
		}
	}
	if (w->phase == CCL_PHASE_HOLD) {
		w->extra = w->wfull_prev > w->cwnd_r ? w->wfull_prev - w->cwnd_r : 0;
	} else if (w->phase == CCL_PHASE_RAMP && p->extra_enable && w->cwnd_r >= ssthresh &&
		   w->wfull_prev > w->cwnd_r) {
		u64 g = (u64)w->ramp_q16 + (u64)ccl_min64(acked, 1U << 20) * (p->a_q16 - 65536);
		u32 room = w->wfull_prev - w->cwnd_r;

		w->extra += (u32)(g >> 16);
		w->ramp_q16 = (u16)(g & 0xffff);
		if (w->extra > room)
			w->extra = room;
	}
}

/*
 * Once per round, with C(t) = LSRTT / RTT_min (Eq. 4 with the
 * resolutions of 4.2):
 *   t* = first CA round of the cycle with C > alpha:
 *        W_full^i = cwnd_p(t*) * beta                                 (Eq. 2)
 *   zero: C > alpha, cwnd >= W_full^{i-1}, slow start, no W_full yet, or
 *         already ZERO this cycle                      -> extra = 0
 *   ramp: cwnd_p(t+1) = min(a * cwnd_p(t), W_full^{i-1})   (grown per ACK)
 *   hold: extra = W_full^{i-1} - cwnd, once cwnd_p reached W_full^{i-1}
 * Phases only move RAMP -> HOLD -> ZERO within a cycle.  Returns whether a t*
 * was found in this round.
 *
 * By default (zero_on_c = 0; docs/ub_reno.md) in RAMP/HOLD, C > alpha does
 * not zero the extra window; it re-estimates the target lower,
 *   W_full := beta * cwnd_p(t),  extra = max(0, W_full - cwnd_r),  HOLD,
 * and again on every further round with C > alpha, so a real standing queue
 * is backed off geometrically (3 % a round) while ACK-clock noise that
 * lifts C a hair over alpha costs 3 % instead of the whole extra window.
 * "C > alpha" means c_rounds judged rounds in a row with C > alpha
 * (default 2), for t* and for the re-estimate alike: a standing queue is
 * still there a round later, while the ACK-clock burst that lifts one
 * round's C over alpha is gone; a round that is over alpha but not yet
 * persistent counts as uncongested.  zero_on_c = 1 (literal) reacts to one.
 * ZERO then only when cwnd_r >= W_full.  The last re-estimate is the W_full
 * carried to the next cycle, unless Reno, having caught up, crosses alpha
 * itself later in the cycle: that crossing is a fresh t* (without it W_full
 * could only fall, 3 % per re-estimate, and would drift well below the
 * BDP within a minute).  zero_on_c = 1 restores the literal rule.
 *
 * clear_max records the largest cwnd_p of a CA round judged not over
 * alpha since the last round that was: the most the pipe was seen to hold
 * without a queue (used by ubl_loss).
 *
 * The first round after recovery is not judged (settle): its RTT samples
 * belong to packets sent during recovery behind the queue that caused the
 * loss, so C(t) there is the old cycle's congestion, not the new one's.
 */
CCL_CORE u32 ubl_round(struct ubl_win *w, u32 c_q16, u32 ssthresh,
		       const struct ccl_ub_reno_params *p)
{
	u64 prop = (u64)w->cwnd_r + w->extra;
	u32 found_now = 0;
	bool over;

	if (w->settle) {
		w->settle = 0;
		w->c_over = 0;
		return 0;
	}
	if (c_q16 > p->alpha_q16)
		w->c_over = w->c_over < 0xff ? w->c_over + 1 : 0xff;
	else
		w->c_over = 0;
	over = w->c_over && (p->zero_on_c || w->c_over >= p->c_rounds);
	if (over)
		w->clear_max = 0;
	else if (w->cwnd_r >= ssthresh && prop > w->clear_max)
		w->clear_max = ccl_sat32(prop);
	if (!p->zero_on_c && over && p->extra_enable && w->wfull_prev &&
	    (w->phase == CCL_PHASE_RAMP || w->phase == CCL_PHASE_HOLD) && w->cwnd_r >= ssthresh) {
		u32 wf = ccl_sat32((prop * p->beta_q16) >> 16);

		found_now = !w->found;
		w->wfull_prev = wf;
		w->wfull_cur = wf;
		w->found = 1;
		if (w->cwnd_r >= wf) {
			w->phase = CCL_PHASE_ZERO;
			w->extra = 0;
		} else {
			w->phase = CCL_PHASE_HOLD;
			w->extra = wf - w->cwnd_r;
		}
		return found_now;
	}
	if (over && !w->found && w->cwnd_r >= ssthresh) {
		w->wfull_cur = ccl_sat32((prop * p->beta_q16) >> 16);
		w->found = 1;
		found_now = 1;
	}
	if (!p->extra_enable || !w->wfull_prev || over || w->phase == CCL_PHASE_ZERO ||
	    w->cwnd_r >= w->wfull_prev || w->cwnd_r < ssthresh) {
		/* Reno caught up with a re-estimated W_full; let its own
		 * crossing of alpha measure t* afresh, or W_full could only
		 * ever fall from cycle to cycle. */
		if (!p->zero_on_c && (w->phase == CCL_PHASE_RAMP || w->phase == CCL_PHASE_HOLD) &&
		    w->wfull_prev && w->cwnd_r >= w->wfull_prev && w->cwnd_r >= ssthresh)
			w->found = 0;
		if (w->cwnd_r >= ssthresh)
			w->phase = CCL_PHASE_ZERO;
		w->extra = 0;
	} else if (w->phase != CCL_PHASE_RAMP || prop >= w->wfull_prev) {
		w->phase = CCL_PHASE_HOLD;
		w->extra = w->wfull_prev - w->cwnd_r;
	}
	return found_now;
}

/*
 * The kernel set the window itself (PRR's end, an RTO, an undo, a restart
 * after idle): Reno's window is the kernel's, with no extra window, a fresh
 * count, and the next round not judged.
 */
CCL_CORE void ubl_sync(struct ubl_win *w, u32 cwnd)
{
	w->cwnd_r = cwnd;
	w->extra = 0;
	w->cwnd_cnt = 0;
	w->settle = 1;
}

/*
 * Loss (fast retransmit): the cycle ends.  W_full^{i} becomes the next
 * cycle's target if a t* was found; Reno halves (cwnd_r, or cwnd_p with
 * md_base).  Returns the new ssthresh.
 *
 * A cycle that ends without a t* (a loss before the RTT rose: a burst
 * after an ACK-clock stall, a random loss) keeps W_full^{i-1} (the
 * paper), but by default (zero_on_c = 0) not below what the cycle
 * showed the pipe holds without a queue:
 *   W_full^{i-1} := max(W_full^{i-1}, beta * clear_max)
 * Without it only re-estimates, which only lower W_full, would move it
 * between cycles that end early (seen: 157 -> 55 over six cycles of a
 * stalling host, each ending below the RTT rise, where Reno alone
 * reached 115-153 with no queue).  A flow with no W_full yet stays Reno:
 * on a path whose losses all come before the queue (random loss) the
 * extra window stays off, as before.
 */
CCL_CORE u32 ubl_loss(struct ubl_win *w, const struct ccl_ub_reno_params *p)
{
	u32 base = p->md_base ? w->cwnd_r + w->extra : w->cwnd_r;

	w->cycle++;
	if (w->found) {
		w->wfull_prev = w->wfull_cur;
	} else if (!p->zero_on_c && w->wfull_prev) {
		u32 seen = ccl_sat32(((u64)w->clear_max * p->beta_q16) >> 16);

		if (seen > w->wfull_prev)
			w->wfull_prev = seen;
	}
	w->clear_max = 0;
	w->found = 0;
	w->extra = 0;
	w->ramp_q16 = 0;
	w->settle = 1;
	w->phase = p->extra_enable && w->wfull_prev ? CCL_PHASE_RAMP : CCL_PHASE_ZERO;
	return base / 2 > 2 ? base / 2 : 2;
}

/*
 * ssthresh(): the loss with the kernel's window `cwnd` in hand.  When the
 * kernel changed the window since the last ACK ub_reno saw (`last`, what
 * ub_reno wrote), Reno's window is the kernel's before it halves: Recovery
 * that ends on an ACK which also detects a new loss has PRR set cwnd to
 * ssthresh and re-enters Recovery with no cong_avoid() between, and the
 * stale Reno window (the one before the first loss) gave twice the
 * kernel's Reno's ssthresh (tcp_reno_ssthresh halves the window it sees).
 */
CCL_CORE u32 ubl_loss_at(struct ubl_win *w, u32 cwnd, u32 last, const struct ccl_ub_reno_params *p)
{
	if (cwnd != last)
		ubl_sync(w, cwnd);
	return ubl_loss(w, p);
}

/* RTO: no extra for the rest of this cycle; W_full kept unless told. */
CCL_CORE void ubl_rto(struct ubl_win *w, const struct ccl_ub_reno_params *p)
{
	w->extra = 0;
	w->phase = CCL_PHASE_ZERO;
	w->found = 0;
	w->clear_max = 0;
	w->settle = 1;
	if (!p->rto_keep_wfull)
		w->wfull_prev = 0;
}

#endif /* __UBL_CORE_H */
