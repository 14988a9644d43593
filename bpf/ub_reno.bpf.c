// SPDX-License-Identifier: GPL-2.0
/*
 * ub_reno.bpf.c - Reno plus an extra window for under-buffered links.
 *
 * Reno runs untouched on its own window cwnd; the sender uses
 * cwnd_p = cwnd + extra.  Per round t of CA cycle i (between two losses):
 *
 *   C(t) = LSRTT(t) / RTT_min,     congestion when C(t) > alpha
 *   W_full^i = cwnd_p(t*) * beta,  t* = first round of cycle i with C > alpha
 *   ramp: C <= alpha, cwnd_p < W_full^{i-1}: cwnd_p grows x a per round
 *   hold: C <= alpha:                       extra = W_full^{i-1} - cwnd
 *   zero: C > alpha or cwnd >= W_full^{i-1}: extra = 0
 *
 * With a buffer below the BDP, Reno's halving leaves the link idle until its
 * window regrows to the BDP; the extra window fills that gap with the
 * window that last filled the pipe without queueing (beta below the point
 * where the RTT started to rise), and steps aside once the queue builds.
 *
 * Hyun & Jang: "A simple TCP modification for under-buffered links" (the
 * letter).  How it works and why it deviates: docs/ub_reno.md.
 *
 * Deviations from the paper, each explained with its measurement in
 * docs/ub_reno.md, "How ccload reads it":
 *  1. The ramp is min(a cwnd_p, W_full) (the printed "extra = a cwnd" would
 *     double the window), spread over the round's ACKs.
 *  2. Zero only once cwnd reaches W_full; C > alpha while ramping or
 *     holding lowers W_full by beta and keeps holding (zero_on_c = 1: the
 *     paper's).
 *  3. A loss halves Reno's own window; W_full carries over from a cycle
 *     that found t*; one that did not keeps W_full, raised to beta times
 *     the largest window it held with no queue; RTO zeroes the extra
 *     window for the cycle.
 *  4. LSRTT is a slow EWMA with a two-sided Page CUSUM level-shift detector.
 *  5. The round after the kernel changed the window is not judged, and
 *     ssthresh() resyncs to the kernel's window.
 *  6. "C > alpha" means c_rounds (2) judged rounds in a row (1 = the
 *     paper's).
 *
 *   phases:  SS (cycle 0) --loss--> ZERO (cycle 1: no W_full yet) --loss-->
 *            RAMP -> HOLD -> ZERO --loss--> RAMP ...
 */
#include "ccload.bpf.h"
#include "core/ubl_core.h"

char _license[] SEC("license") = "GPL";

#define CCL_PARAMS struct ccl_ub_reno_params
#define CCL_PARAMS_TABLE CCL_UB_RENO_PARAMS
#include "ccload_maps.bpf.h"

/* Per-flow state (104 bytes of icsk_ca_priv). */
struct ub_reno {
	struct ubl_ls ls; /* LSRTT estimator */
	struct ubl_win w; /* Reno window, extra window, W_full, phase */
	u32 rtt_min_us;	  /* min RTT ever (as Vegas) */
	u32 rtt_us;	  /* last RTT sample */
	u32 c_q16;	  /* last C(t) */
	u32 last_cwnd;	  /* external-change sync */
	struct ccl_round round;
};

_Static_assert(sizeof(struct ub_reno) <= CCL_CA_PRIV_SIZE, "ub_reno state must fit icsk_ca_priv");

CCL_INIT(ub_reno_init)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ub_reno *ca = inet_csk_ca(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	ca->w.cwnd_r = tp->snd_cwnd;
	ca->w.phase = CCL_PHASE_ZERO;
	ca->rtt_min_us = CCL_U32_MAX;
	ccl_round_reset(&ca->round, tp->snd_nxt);
	ca->last_cwnd = tp->snd_cwnd;
}

/* 4.3: RTT samples feed rtt_min and LSRTT, only in Open/Disorder. */
CCL_PKTS_ACKED(ub_reno_pkts_acked)
{
	struct ub_reno *ca = inet_csk_ca(sk);
	struct ccl_ub_reno_params p;
	u16 up;
	u32 r;

	if (sample->rtt_us <= 0 || ccl_ca_state(sk) > TCP_CA_Disorder)
		return;
	r = sample->rtt_us;
	ccl_params(ccl_profile_of(sk), &p);
	if (r < ca->rtt_min_us)
		ca->rtt_min_us = r;
	ca->rtt_us = r;
	up = ca->ls.det_up + ca->ls.det_dn;
	ubl_lsrtt(&ca->ls, r, &p);
	if ((u16)(ca->ls.det_up + ca->ls.det_dn) != up)
		stat_inc(CCL_STAT_LSRTT_SHIFTS);
}

static __always_inline u8 ub_reno_phase(const struct tcp_sock *tp, const struct ub_reno *ca)
{
	return ca->w.cwnd_r < tp->snd_ssthresh ? CCL_PHASE_SS : ca->w.phase;
}

static __always_inline void ub_reno_emit(struct sock *sk, struct ub_reno *ca, u32 round,
					 u32 profile)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_event *ev;
	struct ccl_tel_ubl *t;

	ev = ccl_event_reserve(sk, CCL_ALGO_UB_RENO, round, ub_reno_phase(tp, ca), profile);
	if (!ev)
		return;
	t = &ev->u.ubl;
	t->lsrtt_us = ca->ls.mu_q3 >> 3;
	t->rtt_us = ca->rtt_us;
	t->rtt_min_us = ca->rtt_min_us;
	t->c_q16 = ca->c_q16;
	t->gp_us = ca->ls.gp_q3 >> 3;
	t->gn_us = ca->ls.gn_q3 >> 3;
	t->det_up = ca->ls.det_up;
	t->det_dn = ca->ls.det_dn;
	t->cycle = ca->w.cycle;
	t->cwnd_r = ca->w.cwnd_r;
	t->extra = ca->w.extra;
	t->wfull_prev = ca->w.wfull_prev;
	t->wfull_cur = ca->w.wfull_cur;
	t->found = ca->w.found;
	ccl_event_submit(ev);
}

CCL_CONG_AVOID(ub_reno_cong_avoid)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ub_reno *ca = inet_csk_ca(sk);
	struct ccl_ub_reno_params p;
	u32 profile = ccl_profile_of(sk);
	u32 cwnd;

	ccl_params(profile, &p);
	stat_inc(CCL_STAT_ACKS);

	/* The kernel changed the window (PRR end, RTO, undo, idle restart). */
	if (tp->snd_cwnd != ca->last_cwnd) {
		ubl_sync(&ca->w, tp->snd_cwnd);
		ccl_round_reset(&ca->round, tp->snd_nxt);
	}

	/* Reno on its own window; HOLD keeps cwnd_p at W_full^{i-1}. */
	if (tcp_is_cwnd_limited(sk))
		ubl_ack(&ca->w, acked, tp->snd_ssthresh, &p);

	/* Once per round, the extra window from C(t). */
	if (ccl_round_on_seq(&ca->round, ack, tp->snd_nxt)) {
		ca->c_q16 = ubl_c_q16(ca->ls.mu_q3 >> 3, ca->rtt_min_us);
		if (ubl_round(&ca->w, ca->c_q16, tp->snd_ssthresh, &p))
			stat_inc(CCL_STAT_WFULL_FOUND);
		stat_inc(CCL_STAT_ROUNDS);
		if (ccl_trace_due(sk, ca->round.cnt, p))
			ub_reno_emit(sk, ca, ca->round.cnt, profile);
	}

	/* The kernel's window: cwnd_p = Reno's window + the extra window, within the clamp. */
	cwnd = ca->w.cwnd_r + ca->w.extra;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
	ca->last_cwnd = cwnd;
}

CCL_SSTHRESH(ub_reno_ssthresh)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ub_reno *ca = inet_csk_ca(sk);
	struct ccl_ub_reno_params p;

	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_LOSS_EVENTS);
	/* The kernel's window may be newer than ours (Recovery re-entered on
	 * the ACK that ended it): halve that one, as tcp_reno_ssthresh does. */
	return ubl_loss_at(&ca->w, tp->snd_cwnd, ca->last_cwnd, &p);
}

SEC("struct_ops")
void BPF_PROG(ub_reno_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct ub_reno *ca = inet_csk_ca(sk);
	struct ccl_ub_reno_params p;

	if (ev != CA_EVENT_LOSS)
		return;
	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_RTO);
	ubl_rto(&ca->w, &p);
}

SEC("struct_ops")
__u32 BPF_PROG(ub_reno_undo_cwnd, struct sock *sk)
{
	stat_inc(CCL_STAT_UNDO);
	/* cong_avoid's resync sets cwnd_r to the restored window. */
	return tcp_reno_undo_cwnd(sk);
}

CCL_SET_STATE(ub_reno_set_state)
{
	struct ccl_ub_reno_params p;

	/* An RTO in Recovery skips CA_EVENT_LOSS: the same reset here. */
	if (!ccl_rto_skipped_loss_event(sk, new_state))
		return;
	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_RTO);
	ubl_rto(&((struct ub_reno *)inet_csk_ca(sk))->w, &p);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ub_reno = {
	.init = (void *)ub_reno_init,
	.release = (void *)ccl_release,
	.pkts_acked = (void *)ub_reno_pkts_acked,
	.cong_avoid = (void *)ub_reno_cong_avoid,
	.ssthresh = (void *)ub_reno_ssthresh,
	.cwnd_event = (void *)ub_reno_cwnd_event,
	.set_state = (void *)ub_reno_set_state,
	.undo_cwnd = (void *)ub_reno_undo_cwnd,
	.name = "ub_reno",
};
