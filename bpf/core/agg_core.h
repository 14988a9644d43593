/* SPDX-License-Identifier: GPL-2.0 */
/*
 * agg_core.h - the in-kernel aggregates (struct ccl_agg, ccload_intf.h) as
 * pure functions: which histogram bucket a value falls in, when a flow is
 * sampled, how counter deltas and Recovery time are accounted.  Called by
 * every controller (ccload_agg.bpf.h) and by the cgroup sock_ops program,
 * and by the host unit tests (loader/src/bind/agg_tests.rs).
 *
 * Sampling.  Counters (bytes acked, segments sent and retransmitted) are
 * cumulative in the socket; a flow's delta since its last flush is added at
 * each sample, at each Recovery/Loss transition and when the flow ends, so
 * the sums are exact.  Histograms get one sample per flow per smoothed RTT
 * (the first hook call after srtt has elapsed), so a long flow does not
 * outweigh a short one by its ACK count, and the cost is one histogram
 * update per flow per round trip.
 */
#ifndef __CCL_AGG_CORE_H
#define __CCL_AGG_CORE_H

#include "ccl_core.h"

/* Keep the compiler from dropping a bounds mask it can prove redundant: the
 * verifier cannot prove it, and needs to see it. */
#ifdef __bpf__
#define CCL_BARRIER_VAR(v) asm volatile("" : "+r"(v))
#else
#define CCL_BARRIER_VAR(v) ((void)0)
#endif

/* Index of the highest set bit, 1-based; 0 for 0 (no clz in BPF). */
CCL_CORE u32 ccl_fls64(u64 x)
{
	u32 r = 1;

	if (!x)
		return 0;
	if (x >> 32) {
		x >>= 32;
		r += 32;
	}
	if (x >> 16) {
		x >>= 16;
		r += 16;
	}
	if (x >> 8) {
		x >>= 8;
		r += 8;
	}
	if (x >> 4) {
		x >>= 4;
		r += 4;
	}
	if (x >> 2) {
		x >>= 2;
		r += 2;
	}
	if (x >> 1)
		r += 1;
	return r;
}

/*
 * Log-linear bucket of v: values below CCL_HIST_SUB have their own bucket;
 * above, bucket (e - SUB_BITS + 1) * SUB + m where 2^e <= v < 2^(e+1) and m
 * is the SUB_BITS bits below the leading one.  Bucket widths are 1/8 of a
 * power of two (at most 12.5 % of the value).  Values past the range land in
 * the last bucket.
 */
CCL_CORE u32 ccl_hist_bucket(u64 v)
{
	u32 e, b;

	if (v < CCL_HIST_SUB)
		return (u32)v;
	e = ccl_fls64(v) - 1;
	b = (e - CCL_HIST_SUB_BITS + 1) * CCL_HIST_SUB +
	    (u32)((v >> (e - CCL_HIST_SUB_BITS)) & (CCL_HIST_SUB - 1));
	return b < CCL_HIST_BUCKETS ? b : CCL_HIST_BUCKETS - 1;
}

/* Smallest value of bucket b (the inverse of ccl_hist_bucket). */
CCL_CORE u64 ccl_hist_lower(u32 b)
{
	u32 e;

	if (b < CCL_HIST_SUB)
		return b;
	e = b / CCL_HIST_SUB + CCL_HIST_SUB_BITS - 1;
	return (u64)(CCL_HIST_SUB + b % CCL_HIST_SUB) << (e - CCL_HIST_SUB_BITS);
}

/* Count v in histogram h. */
CCL_CORE void ccl_hist_add(u64 *h, u64 v)
{
	u32 b = ccl_hist_bucket(v);

	CCL_BARRIER_VAR(b);
	CCL_ADD(&h[b & (CCL_HIST_BUCKETS - 1)], 1);
}

/* Delivery rate of a rate sample in kbit/s; 0 without a sample. */
CCL_CORE u64 ccl_rate_kbps(u32 delivered, u32 interval_us, u32 mss)
{
	if (!interval_us)
		return 0;
	return (u64)delivered * mss * 8000 / interval_us;
}

/* Add the flow's counter deltas since the last flush. */
CCL_CORE void ccl_agg_flush(struct ccl_agg *a, struct ccl_agg_sk *s, const struct ccl_agg_in *in)
{
	if (in->bytes_acked > s->bytes_acked)
		CCL_ADD(&a->c[CCL_AGG_bytes_acked], in->bytes_acked - s->bytes_acked);
	/* u32 counters: unsigned subtraction is right across a wrap. */
	CCL_ADD(&a->c[CCL_AGG_segs_out], (u32)(in->segs_out - s->segs_out));
	CCL_ADD(&a->c[CCL_AGG_retrans_segs], (u32)(in->total_retrans - s->retrans));
	s->bytes_acked = in->bytes_acked;
	s->segs_out = in->segs_out;
	s->retrans = in->total_retrans;
}

/* First sight of a flow: count it, start its deltas from its counters now. */
CCL_CORE void ccl_agg_start(struct ccl_agg *a, struct ccl_agg_sk *s, const struct ccl_agg_in *in,
			    u32 ca_state)
{
	if (s->started)
		return;
	s->started = 1;
	s->ca_state = ca_state;
	s->bytes_acked = in->bytes_acked;
	s->segs_out = in->segs_out;
	s->retrans = in->total_retrans;
	s->hist_ns = in->now_ns;
	s->start_ns = in->now_ns;
	CCL_ADD(&a->c[CCL_AGG_flows_started], 1);
}

/* A hook call with fresh socket values: flush and sample the histograms if
 * a smoothed RTT has passed since the flow's last sample.  Returns 1 when
 * it sampled. */
CCL_CORE int ccl_agg_tick(struct ccl_agg *a, struct ccl_agg_sk *s, const struct ccl_agg_in *in)
{
	u64 rate;

	if (!in->srtt_us || in->now_ns - s->hist_ns < (u64)in->srtt_us * 1000)
		return 0;
	s->hist_ns = in->now_ns;
	ccl_agg_flush(a, s, in);
	rate = ccl_rate_kbps(in->rate_delivered, in->rate_interval_us, in->mss);
	CCL_ADD(&a->c[CCL_AGG_samples], 1);
	CCL_ADD(&a->c[CCL_AGG_srtt_sum_us], in->srtt_us);
	CCL_ADD(&a->c[CCL_AGG_cwnd_sum], in->cwnd);
	CCL_ADD(&a->c[CCL_AGG_rate_sum_kbps], rate);
	ccl_hist_add(a->hist[CCL_HIST_srtt], in->srtt_us);
	ccl_hist_add(a->hist[CCL_HIST_cwnd], in->cwnd);
	ccl_hist_add(a->hist[CCL_HIST_rate], rate);
	return 1;
}

/*
 * A congestion-state change to new_state (enum tcp_ca_state).  Entering
 * Recovery from Open/Disorder/CWR is a loss event; every entry into Loss
 * (the kernel re-enters it on each backed-off timeout) is an RTO when
 * count_rto is set (the cgroup program counts RTOs from its RTO callback
 * instead).  Time from entering Recovery or Loss to leaving both is
 * Recovery time.
 */
CCL_CORE void ccl_agg_state(struct ccl_agg *a, struct ccl_agg_sk *s, u32 new_state, u64 now_ns,
			    int count_rto)
{
	u32 old = s->ca_state;

	if (new_state == CCL_CA_RECOVERY && old != CCL_CA_RECOVERY && old != CCL_CA_LOSS)
		CCL_ADD(&a->c[CCL_AGG_loss_events], 1);
	if (new_state == CCL_CA_LOSS && count_rto)
		CCL_ADD(&a->c[CCL_AGG_rtos], 1);
	if (new_state >= CCL_CA_RECOVERY) {
		if (!s->rec_start_ns)
			s->rec_start_ns = now_ns ? now_ns : 1;
	} else if (s->rec_start_ns) {
		if (now_ns > s->rec_start_ns)
			CCL_ADD(&a->c[CCL_AGG_recovery_ns], now_ns - s->rec_start_ns);
		s->rec_start_ns = 0;
	}
	s->ca_state = new_state;
}

/* The flow ends: last deltas, close an open Recovery period, count it out;
 * a short one (at most CCL_AGG_SHORT_BYTES each way in its life) adds its
 * completion time, start to end, in us. */
CCL_CORE void ccl_agg_end(struct ccl_agg *a, struct ccl_agg_sk *s, const struct ccl_agg_in *in)
{
	u64 fct_us;

	if (!s->started)
		return;
	if (in->bytes_acked <= CCL_AGG_SHORT_BYTES && in->bytes_received <= CCL_AGG_SHORT_BYTES &&
	    s->start_ns && in->now_ns >= s->start_ns) {
		fct_us = (in->now_ns - s->start_ns) / 1000;
		CCL_ADD(&a->c[CCL_AGG_fct_sum_us], fct_us);
		ccl_hist_add(a->hist[CCL_HIST_fct], fct_us);
	}
	ccl_agg_flush(a, s, in);
	ccl_agg_state(a, s, CCL_CA_OPEN, in->now_ns, 0);
	CCL_ADD(&a->c[CCL_AGG_flows_ended], 1);
	s->started = 0;
}

/* Is this round's telemetry record due under trace_ms (per-flow time
 * sampling)?  0 = every traced round; otherwise at most one per trace_ms. */
CCL_CORE int ccl_trace_ms_due(struct ccl_agg_sk *s, u64 now_ns, u32 trace_ms)
{
	if (!trace_ms)
		return 1;
	if (s->trace_ns && now_ns - s->trace_ns < (u64)trace_ms * 1000000)
		return 0;
	s->trace_ns = now_ns;
	return 1;
}

#endif /* __CCL_AGG_CORE_H */
