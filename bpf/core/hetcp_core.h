/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hetcp_core.h - HE-TCP arithmetic core (docs/hetcp.md: the GTSW estimator and the window it sets).
 *
 * Pure integer functions shared by bpf/hetcp.bpf.c and the host unit tests
 * (bpf/core-tests/src/core_tests.rs: f64 model of Eq. 1-3 and of Fig. 2;
 * the state machine below, one function per hook, in a closed loop).
 * Rates are segments/s x 256 (Q8), times us, windows segments.
 */
#ifndef __HETCP_CORE_H
#define __HETCP_CORE_H

#include "ccl_core.h"

/* One GTSW sample. */
struct hetcp_sample {
	/* in */
	u32 ack_cnt;	 /* segments (or ACKs) since the previous sample */
	u32 del_us;	 /* time since the previous sample, us (>= 1) */
	u32 ref_us;	 /* RTT in T_ratio: BaseRTT (Fig. 2) or srtt (Eq. 2) */
	u32 base_rtt_us; /* BaseRTT for the BDP */
	u64 pre_bw_q8;	 /* BW_{k-1}, segments/s x 256 */
	/* out */
	u32 tr_q16; /* a_k = dt / (RTT + dt), x 65536 */
	u64 cur_q8; /* CurBW = PacketCnt / dt, segments/s x 256 */
	u64 bw_q8;  /* BW_k */
	u32 ssth;   /* BW_k * BaseRTT, segments (Eq. 3) */
};

/* SampleInterval = 1 if cwnd < si_small else floor(cwnd / si_div) (Fig. 2). */
CCL_CORE u32 hetcp_sample_interval(u32 cwnd, u32 si_small, u32 si_div)
{
	u32 si;

	if (cwnd < si_small || !si_div)
		return 1;
	si = cwnd / si_div;
	return si ? si : 1;
}

/*
 * GTSW estimator:
 *   a_k   = dt_k / (RTT_k + dt_k)
 *   CurBW = PacketCnt / dt_k
 *   BW_k  = (1 - a_k) BW_{k-1} + a_k CurBW                  (Eq. 1-2)
 *   ssthresh = BW_k * BaseRTT / PacketSize                  (Eq. 3, segments)
 * No overflow while BW < 2^31 Q8 (8e6 seg/s, ~100 Gb/s), ack_cnt < 2^20,
 * BaseRTT < 2^24 us.
 */
CCL_CORE void hetcp_gtsw(struct hetcp_sample *s)
{
	u64 del = s->del_us ? s->del_us : 1;
	u64 tr = (del << 16) / ((u64)s->ref_us + del);
	u64 cur = ((u64)s->ack_cnt << 8) * CCL_USEC_PER_SEC / del;
	u64 pre = ccl_min64(s->pre_bw_q8, 1ULL << 40);

	cur = ccl_min64(cur, 1ULL << 40);
	s->tr_q16 = (u32)tr;
	s->cur_q8 = cur;
	s->bw_q8 = ((65536 - tr) * pre + tr * cur) >> 16;
	s->ssth = ccl_sat32(s->bw_q8 * s->base_rtt_us / (CCL_USEC_PER_SEC << 8));
}

/* Slow-start modes (tunable ss_mode). */
enum hetcp_ss_mode {
	HETCP_SS_QUEUE = 0,   /* default: a sample ends slow start once it sees a queue */
	HETCP_SS_BURST = 1,   /* until the first loss ssthresh = max(GTSW, burst estimate) */
	HETCP_SS_LITERAL = 2, /* Fig. 2 literally: every sample writes ssthresh */
};

/*
 * Default slow start (docs/hetcp.md, "How ccload reads it").  During slow start the ACK rate is
 * the flow's own sending rate, about half the next round's window, so a GTSW
 * sample measures the flow, not the path, and ending slow start on it (Fig. 2
 * literally) leaves the flow at a fraction of the BDP.  A sample may end slow
 * start only when it measures the path: a queue stands at the bottleneck, and
 * the estimator has at least 2 samples.  The window then already exceeds the
 * BDP, so slow start ends at once:
 *   ssthresh = min(cwnd, max(GTSW, burst estimate, floor)).
 *
 * A queue of q = max(2 ms, BaseRTT / 8) "stands" when every RTT sample for q
 * of arrival time has shown it:
 *   rtt >= BaseRTT + q  for each ACK in [t0, t],  t - t0 >= q.
 * One sample is not enough: a host that stops the path for a few ms (a
 * busy VM's vCPU, a paused delay line) returns the ACKs held meanwhile in a
 * burst, each with the pause in its RTT, and one such sample would end slow
 * start at a small part of the pipe.  Such a burst arrives within a ms and the next ACK is on time,
 * while the ACKs of a real queue keep arriving late, at the link's rate.
 * The run costs q of more slow start, a queue of q + about BDP / 8 at exit.
 */
CCL_CORE u32 hetcp_ss_queue_us(u32 base_rtt_us)
{
	return base_rtt_us / 8 > 2000 ? base_rtt_us / 8 : 2000;
}

/*
 * The run of queueing RTT samples, per ACK: the arrival time (us, low 32
 * bits, never 0) of the first sample of the current run, or 0 when this
 * sample shows no queue.
 */
CCL_CORE u32 hetcp_ss_queue_run(u32 run_start, u32 now_us, u32 rtt_us, u32 base_rtt_us)
{
	if (base_rtt_us == CCL_U32_MAX ||
	    (u64)rtt_us < (u64)base_rtt_us + hetcp_ss_queue_us(base_rtt_us))
		return 0;
	if (run_start)
		return run_start;
	return now_us ? now_us : 1;
}

/*
 * Returns the ssthresh to write when the run that started at run_start
 * (hetcp_ss_queue_run) has lasted q by now_us, or 0 while slow start
 * continues (Reno's).
 */
CCL_CORE u32 hetcp_ss_exit(u32 samples, u32 run_start, u32 now_us, u32 base_rtt_us, u32 snd_cwnd,
			   u32 gtsw, u32 burst, u32 floor)
{
	u32 v;

	if (samples < 2 || !run_start || base_rtt_us == CCL_U32_MAX ||
	    now_us - run_start < hetcp_ss_queue_us(base_rtt_us))
		return 0;
	v = gtsw > burst ? gtsw : burst;
	v = v > floor ? v : floor;
	v = v < snd_cwnd ? v : snd_cwnd;
	return v > floor ? v : floor;
}

/* What a loss does to the estimator (tunable loss_bw). */
enum hetcp_loss_bw {
	HETCP_LOSS_RESTART = 0, /* Fig. 2: PreBW = 0, ssthresh = 0 (the floor) */
	HETCP_LOSS_KEEP = 1,	/* the estimate survives the loss */
};

/*
 * ssthresh written when recovery ends (the first cong_avoid after the loss).
 * Fig. 2 restarts the estimator and writes ssthresh = 0: congestion
 * avoidance until the next sample, whose rate is that of the halved window,
 * so RI regrows only to what the halved window delivers.  A random loss
 * leaves the path as it was, and the estimate taken before it still measures
 * the path (at most the bottleneck rate: ACKs cannot return faster), so with
 * loss_bw = 1 the window regrows by RI at once toward
 *   ssthresh = max(BW_{k-1} x BaseRTT, floor)                 (Eq. 3)
 * After a congestive loss that target is the BDP, where Reno's halving of a
 * full buffer lands anyway.
 */
CCL_CORE u32 hetcp_after_loss_ssth(u32 loss_bw, u32 kept_ssth, u32 floor)
{
	if (loss_bw != HETCP_LOSS_KEEP)
		return floor;
	return kept_ssth > floor ? kept_ssth : floor;
}

/*
 * ssthresh a GTSW sample writes after the first loss; 0 = write nothing.
 * Fig. 2 (loss_bw 0) writes Eq. 3 at every sample.  With loss_bw 1 a sample
 * taken while RI still climbs to the target set at the loss writes nothing:
 * that round's ACKs are those of the halved window, and the estimate decays
 * toward their rate (a_k ~ 1/11 per sample, ~0.5 of the gap per round) and
 * would stop RI at ~0.8 of the target.  Once the window reaches the target,
 * samples write Eq. 3 again (floored).
 */
CCL_CORE u32 hetcp_ri_ssth(u32 loss_bw, u32 cwnd, u32 cur_ssthresh, u32 gtsw_ssth, u32 floor)
{
	if (loss_bw == HETCP_LOSS_KEEP && cwnd < cur_ssthresh)
		return 0;
	return gtsw_ssth > floor ? gtsw_ssth : floor;
}

/*
 * The window Reno's additive increase counts against, scaled by the base
 * RTT (ai_rtt_ms, H-TCP's RTT scaling; 0 = Reno):
 *   cwnd += alpha / cwnd per segment,  alpha = max(1, BaseRTT / RTT_ref)
 * i.e. one segment per cwnd / alpha acknowledged.  Reno's window grows one
 * segment a round, so of two flows through one bottleneck the one with 4x
 * the RTT grows 4x slower in segments per second, and since a kept
 * estimate (loss_bw 1) preserves each flow's rate through a loss, the
 * shorter flow's lead only grows (docs/hetcp.md, "Sharing a link").
 * Scaled, every flow
 * above RTT_ref grows RTT_ref^-1 segments per second, as CUBIC's window
 * grows in time, not rounds; below RTT_ref it is Reno.
 */
CCL_CORE u32 hetcp_ai_window(u32 cwnd, u32 base_rtt_us, u32 ai_rtt_ms)
{
	u64 ref = (u64)ai_rtt_ms * 1000, w;

	if (!ai_rtt_ms || base_rtt_us == CCL_U32_MAX || base_rtt_us <= ref)
		return cwnd;
	w = (u64)cwnd * ref / base_rtt_us;
	return w ? (u32)w : 1;
}

/* ---------------------------------------------------------------------------
 * The state machine (docs/hetcp.md): per-flow state and one function per
 * hook.  The hook file copies the kernel's fields in and applies what comes
 * out (ssthresh writes, Reno's growth through the kernel's helpers).  The
 * phases: the header of bpf/hetcp.bpf.c.
 * ------------------------------------------------------------------------- */

enum hetcp_flags {
	HETCP_F_FIRST_LOSS = 1, /* a loss has been seen: RI instead of SS */
	HETCP_F_PENDING_CA = 2, /* write ssthresh at the next cong_avoid (recovery is over) */
	HETCP_F_SS_DONE = 4,	/* ss_mode 0: a queueing sample has ended slow start */
};

/* Per-flow state (64 bytes of icsk_ca_priv). */
struct hetcp {
	u64 pre_time_us;	/* tcp_mstamp of the last sample, us */
	u64 pre_bw_q8;		/* BW_{k-1}, segments/s x 256 */
	u64 saved_bw_q8;	/* BW at the last loss, for undo and RTO */
	u32 ack_cnt;		/* segments (or ACKs) since the last sample */
	u32 gtsw_ssth;		/* last BW * BaseRTT, segments */
	u32 ss_burst;		/* ss_mode 1: max CurBW * BaseRTT before the first loss */
	u32 base_rtt_us;	/* min RTT sample, us */
	struct ccl_round round; /* round tracker (telemetry, stats) */
	u32 samples;		/* GTSW samples since init */
	u32 losses;		/* loss events */
	u32 q_run_us;		/* ss_mode 0: first ACK of the run showing a queue, us */
	u8 flags;		/* enum hetcp_flags */
};

/* What one cong_avoid() tells the state machine. */
struct hetcp_ack {
	u64 now_us;	  /* tcp_mstamp */
	u32 snd_cwnd;	  /* segments */
	u32 snd_ssthresh; /* segments */
	u32 acked;	  /* segments this ACK acknowledged */
	u32 srtt_us;	  /* smoothed RTT (rtt_src 1) */
};

/* What it decided. */
struct hetcp_out {
	u32 ssth;    /* ssthresh to write; 0 = leave the kernel's */
	u32 reno;    /* no RTT sample yet: grow as plain Reno */
	u32 sampled; /* a GTSW sample was taken (s and si hold it) */
	u32 si;	     /* SampleInterval in force */
	struct hetcp_sample s;
};

CCL_CORE void hetcp_on_init(struct hetcp *ca, u64 now_us, u32 snd_nxt)
{
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->base_rtt_us = CCL_U32_MAX;
	ca->pre_time_us = now_us;
	ccl_round_reset(&ca->round, snd_nxt);
}

/* Slow start, rapid increase (below ssthresh after a loss) or congestion avoidance. */
CCL_CORE u8 hetcp_phase(const struct hetcp *ca, u32 snd_cwnd, u32 snd_ssthresh)
{
	if (snd_cwnd >= snd_ssthresh)
		return CCL_PHASE_CA;
	return ca->flags & HETCP_F_FIRST_LOSS ? CCL_PHASE_RI : CCL_PHASE_SS;
}

/* pkts_acked(): BaseRTT = min RTT; before the first loss, the queue run
 * that may end slow start. */
CCL_CORE void hetcp_on_rtt(struct hetcp *ca, s32 rtt_us, u32 now_us)
{
	if (rtt_us <= 0)
		return;
	if ((u32)rtt_us < ca->base_rtt_us)
		ca->base_rtt_us = (u32)rtt_us;
	if (!(ca->flags & (HETCP_F_FIRST_LOSS | HETCP_F_SS_DONE)))
		ca->q_run_us =
			hetcp_ss_queue_run(ca->q_run_us, now_us, (u32)rtt_us, ca->base_rtt_us);
}

/* The ssthresh a GTSW sample writes (0 = none), by phase and ss_mode. */
CCL_CORE u32 hetcp_sample_ssth(struct hetcp *ca, const struct ccl_hetcp_params *p, u32 now_us,
			       u32 snd_cwnd, u32 snd_ssthresh, u32 gtsw)
{
	u32 ssth = gtsw;

	if (snd_cwnd < p->low_wnd)
		return 0;
	if (!(ca->flags & (HETCP_F_FIRST_LOSS | HETCP_F_SS_DONE)) && p->ss_mode == HETCP_SS_QUEUE) {
		/* slow start ends only once a queue stands */
		ssth = hetcp_ss_exit(ca->samples + 1, ca->q_run_us, now_us, ca->base_rtt_us,
				     snd_cwnd, gtsw, ca->ss_burst, p->ssth_floor);
		if (ssth)
			ca->flags |= HETCP_F_SS_DONE;
		return ssth;
	}
	if (p->ss_mode == HETCP_SS_BURST && !(ca->flags & HETCP_F_FIRST_LOSS) &&
	    ca->ss_burst > ssth)
		ssth = ca->ss_burst;
	if (ca->flags & HETCP_F_FIRST_LOSS)
		return hetcp_ri_ssth(p->loss_bw, snd_cwnd, snd_ssthresh, ssth, p->ssth_floor);
	return ssth > p->ssth_floor ? ssth : p->ssth_floor;
}

/*
 * cong_avoid(), before the window grows: the write recovery left pending,
 * then one GTSW sample every SampleInterval segments:
 *   BW_k = (1 - a_k) BW_{k-1} + a_k CurBW,  ssthresh = BW_k BaseRTT  (Eq. 1-3)
 */
CCL_CORE void hetcp_on_ack(struct hetcp *ca, const struct ccl_hetcp_params *p,
			   const struct hetcp_ack *a, struct hetcp_out *o)
{
	u32 ssthresh = a->snd_ssthresh, w;

	__builtin_memset(o, 0, sizeof(*o));
	/*
	 * Fig. 2's "ssthresh = 0" after a loss, applied once PRR is done; with
	 * loss_bw = 1 the kept estimate's BDP instead, and the sample clock
	 * restarts here so that the first sample does not span the recovery
	 * (cong_avoid counts no ACKs during it: CurBW would read a fraction).
	 */
	if (ca->flags & HETCP_F_PENDING_CA) {
		ssthresh = hetcp_after_loss_ssth(p->loss_bw, ca->gtsw_ssth, p->ssth_floor);
		o->ssth = ssthresh;
		if (p->loss_bw == HETCP_LOSS_KEEP) {
			ca->pre_time_us = a->now_us;
			ca->ack_cnt = 0;
		}
		ca->flags &= ~HETCP_F_PENDING_CA;
	}
	if (ca->base_rtt_us == CCL_U32_MAX) {
		o->reno = 1;
		return;
	}
	o->si = hetcp_sample_interval(a->snd_cwnd, p->si_small, p->si_div);
	ca->ack_cnt += p->count_mode ? a->acked : 1;
	if (ca->ack_cnt < o->si)
		return;
	o->sampled = 1;
	o->s.ack_cnt = ca->ack_cnt;
	o->s.del_us = (u32)ccl_min64(a->now_us - ca->pre_time_us, CCL_U32_MAX);
	if (!o->s.del_us)
		o->s.del_us = 1;
	o->s.base_rtt_us = ca->base_rtt_us;
	/* (from o, not ca: a select between a stack and a socket pointer is
	 * one load the verifier refuses) */
	o->s.ref_us = p->rtt_src ? a->srtt_us : o->s.base_rtt_us;
	o->s.pre_bw_q8 = ca->pre_bw_q8;
	hetcp_gtsw(&o->s);
	ca->gtsw_ssth = o->s.ssth;
	if (!(ca->flags & HETCP_F_FIRST_LOSS)) {
		u32 burst = ccl_sat32(o->s.cur_q8 * ca->base_rtt_us / (CCL_USEC_PER_SEC << 8));

		if (burst > ca->ss_burst)
			ca->ss_burst = burst;
	}
	w = hetcp_sample_ssth(ca, p, (u32)a->now_us, a->snd_cwnd, ssthresh, o->s.ssth);
	if (w)
		o->ssth = w;
	ca->pre_bw_q8 = o->s.bw_q8;
	ca->pre_time_us = a->now_us;
	ca->ack_cnt = 0;
	ca->samples++;
}

/*
 * ssthresh() on triple dupack (Fig. 2): cwnd /= 2; PreBW = 0; ssthresh = 0.
 * With loss_bw = 1 (default) the estimate is kept.  Returns the kernel's
 * ssthresh for the reduction (PRR halves toward it).
 */
CCL_CORE u32 hetcp_on_loss(struct hetcp *ca, const struct ccl_hetcp_params *p, u64 now_us,
			   u32 snd_cwnd)
{
	ca->saved_bw_q8 = ca->pre_bw_q8;
	if (p->loss_bw != HETCP_LOSS_KEEP) {
		ca->pre_bw_q8 = 0;
		ca->gtsw_ssth = 0;
	}
	ca->ack_cnt = 0;
	ca->pre_time_us = now_us;
	ca->flags |= HETCP_F_FIRST_LOSS | HETCP_F_PENDING_CA;
	ca->losses++;
	return snd_cwnd >> 1 > 2 ? snd_cwnd >> 1 : 2;
}

/* RTO: the kernel's cwnd/2 ssthresh stays; the estimate too unless rto_reset. */
CCL_CORE void hetcp_on_rto(struct hetcp *ca, u32 rto_reset)
{
	ca->flags &= ~HETCP_F_PENDING_CA;
	if (!rto_reset)
		ca->pre_bw_q8 = ca->saved_bw_q8;
}

/* undo_cwnd(): the loss was spurious; the estimate from before it returns. */
CCL_CORE u32 hetcp_on_undo(struct hetcp *ca, u32 snd_cwnd, u32 prior_cwnd)
{
	ca->pre_bw_q8 = ca->saved_bw_q8;
	ca->flags &= ~HETCP_F_PENDING_CA;
	return snd_cwnd > prior_cwnd ? snd_cwnd : prior_cwnd;
}

/* BW in Mbit/s for a segment size of mss bytes. */
CCL_CORE u32 hetcp_bw_mbps(u64 bw_q8, u32 mss)
{
	return ccl_sat32(bw_q8 * mss * 8 / 256 / CCL_USEC_PER_SEC);
}

#endif /* __HETCP_CORE_H */
