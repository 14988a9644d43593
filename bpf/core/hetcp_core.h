/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hetcp_core.h - HE-TCP arithmetic core (docs/hetcp.md: the GTSW estimator and the window it sets).
 *
 * Pure integer functions shared by bpf/hetcp.bpf.c and the host unit tests
 * (bpf/core-tests/src/core_tests.rs: f64 model of Eq. 1-3 and of Fig. 2).
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
 * burst, each with the pause in its RTT, and ended slow start at 27 segments
 * of a 667-segment pipe (100 Mbit/s, 80 ms: the link 0.77-0.89 used over
 * 20 s).  Such a burst arrives within a ms and the next ACK is on time,
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
 * shorter flow's lead only grows: an 80-ms hetcp beside a 20-ms one kept
 * 0.28-0.29 of the link where cubic's kept 0.26-0.41.  Scaled, every flow
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

/* BW in Mbit/s for a segment size of mss bytes. */
CCL_CORE u32 hetcp_bw_mbps(u64 bw_q8, u32 mss)
{
	return ccl_sat32(bw_q8 * mss * 8 / 256 / CCL_USEC_PER_SEC);
}

#endif /* __HETCP_CORE_H */
