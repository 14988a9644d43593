// SPDX-License-Identifier: GPL-2.0
/*
 * hetcp.bpf.c - HE-TCP: High Efficient TCP with the GTSW bandwidth estimator.
 *
 * Every SampleInterval acknowledged segments the sender updates a generalised
 * time-sliding-window estimate of its bandwidth and sets ssthresh to the
 * estimated BDP; the window then grows by 1 per ACK while below it (slow
 * start, or "rapid increase" after a loss) and by 1/cwnd above it:
 *
 *   BW_k = (1 - a_k) BW_{k-1} + a_k CurBW,  a_k = dt_k / (RTT_k + dt_k)
 *   ssthresh = BW * BaseRTT / PacketSize
 *   SampleInterval = cwnd < 10 ? 1 : cwnd / 10
 *   on triple dupack: cwnd /= 2, BW = 0, ssthresh = 0
 *
 * Park, Lee, Kim, Kang: "HE-TCP: a high efficient TCP for high
 * bandwidth-delay product networks", ICCS 2007.  How it works and why it
 * deviates: docs/hetcp.md.
 *
 * Deviations from the paper, each explained with its measurement in
 * docs/hetcp.md, "How ccload reads it" unless named otherwise:
 *  1. PacketCnt counts acknowledged segments (count_mode = 0: ACK events,
 *     as ns-2 did).
 *  2. "ssthresh = 0 after loss": the kernel halves through PRR, and the
 *     first cong_avoid after recovery writes ssthresh = ssth_floor.
 *  3. RTO keeps the estimator (rto_reset = 0): RI regrows to the last BDP.
 *  4. The first slow start ends only once a queue stands and two samples
 *     are in (ss_mode 0; 2 = Fig. 2 literally).
 *  5. A loss keeps the estimate (loss_bw = 1; 0 = Fig. 2's restart) ("Random
 *     loss: keeping the estimate").
 *  6. Above a base RTT of ai_rtt_ms, congestion avoidance grows in time,
 *     not per round ("Sharing a link").
 *
 *   phases:   SS --loss--> (PRR halving) --> CA <--> RI
 *             RI: cwnd < ssthresh after a loss (+1 per segment toward the BDP)
 */
#include "ccload.bpf.h"
#include "core/hetcp_core.h"

char _license[] SEC("license") = "GPL";

#define CCL_PARAMS struct ccl_hetcp_params
#define CCL_PARAMS_TABLE CCL_HETCP_PARAMS
#include "ccload_maps.bpf.h"

enum hetcp_flags {
	F_FIRST_LOSS = 1, /* a loss has been seen: RI instead of SS */
	F_PENDING_CA = 2, /* write ssthresh = floor at the next cong_avoid */
	F_SS_DONE = 4,	  /* ss_mode 0: a queueing sample has ended slow start */
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

_Static_assert(sizeof(struct hetcp) <= CCL_CA_PRIV_SIZE, "hetcp state must fit icsk_ca_priv");

static __always_inline u8 hetcp_phase(const struct tcp_sock *tp, const struct hetcp *ca)
{
	if (tp->snd_cwnd >= tp->snd_ssthresh)
		return CCL_PHASE_CA;
	return ca->flags & F_FIRST_LOSS ? CCL_PHASE_RI : CCL_PHASE_SS;
}

SEC("struct_ops")
void BPF_PROG(hetcp_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hetcp *ca = inet_csk_ca(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	ca->base_rtt_us = CCL_U32_MAX;
	ca->pre_time_us = tp->tcp_mstamp;
	ccl_round_reset(&ca->round, tp->snd_nxt);
	ccl_flow_init(sk);
}

SEC("struct_ops")
void BPF_PROG(hetcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct hetcp *ca = inet_csk_ca(sk);

	ccl_guard(sk);
	ccl_agg_ack(sk);
	if (sample->rtt_us <= 0)
		return;
	if ((u32)sample->rtt_us < ca->base_rtt_us)
		ca->base_rtt_us = sample->rtt_us;
	if (!(ca->flags & (F_FIRST_LOSS | F_SS_DONE)))
		ca->q_run_us = hetcp_ss_queue_run(ca->q_run_us, (u32)tcp_sk(sk)->tcp_mstamp,
						  sample->rtt_us, ca->base_rtt_us);
}

static __always_inline void hetcp_emit(struct sock *sk, struct hetcp *ca,
				       const struct hetcp_sample *s, u32 si, u32 profile)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_event *ev;
	struct ccl_tel_hetcp *t;

	ev = ccl_event_reserve(sk, CCL_ALGO_HETCP, ca->round.cnt, hetcp_phase(tp, ca), profile);
	if (!ev)
		return;
	t = &ev->u.hetcp;
	t->cur_bw_q8 = s->cur_q8;
	t->bw_q8 = s->bw_q8;
	t->sample_interval = si;
	t->ack_cnt = s->ack_cnt;
	t->del_us = s->del_us;
	t->t_ratio_q16 = s->tr_q16;
	t->bw_mbps = hetcp_bw_mbps(s->bw_q8, tp->mss_cache);
	t->gtsw_ssth = s->ssth;
	t->base_rtt_us = ca->base_rtt_us;
	t->losses = ca->losses;
	ccl_event_submit(ev);
}

SEC("struct_ops")
void BPF_PROG(hetcp_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hetcp *ca = inet_csk_ca(sk);
	struct ccl_hetcp_params p;
	struct hetcp_sample s = {};
	u32 profile = ccl_profile_of(sk);
	u64 now = tp->tcp_mstamp;
	u32 si;

	ccl_params(profile, &p);
	stat_inc(CCL_STAT_ACKS);
	if (ccl_round_on_seq(&ca->round, ack, tp->snd_nxt))
		stat_inc(CCL_STAT_ROUNDS);

	/*
	 * Fig. 2's "ssthresh = 0" after a loss, applied once PRR is done; with
	 * loss_bw = 1 the kept estimate's BDP instead, and the sample clock
	 * restarts here so that the first sample does not span the recovery
	 * (cong_avoid counts no ACKs during it: CurBW would read a fraction).
	 */
	if (ca->flags & F_PENDING_CA) {
		ccl_set_ssthresh(sk, hetcp_after_loss_ssth(p.loss_bw, ca->gtsw_ssth, p.ssth_floor));
		if (p.loss_bw == HETCP_LOSS_KEEP) {
			ca->pre_time_us = now;
			ca->ack_cnt = 0;
		}
		ca->flags &= ~F_PENDING_CA;
	}

	/* No RTT sample yet: plain Reno. */
	if (ca->base_rtt_us == CCL_U32_MAX) {
		tcp_reno_cong_avoid(sk, ack, acked);
		ccl_guard_wrote_cwnd(sk);
		return;
	}

	/* One GTSW sample every SampleInterval segments. */
	si = hetcp_sample_interval(tp->snd_cwnd, p.si_small, p.si_div);
	ca->ack_cnt += p.count_mode ? acked : 1;
	if (ca->ack_cnt >= si) {
		s.ack_cnt = ca->ack_cnt;
		s.del_us = (u32)ccl_min64(now - ca->pre_time_us, CCL_U32_MAX);
		if (!s.del_us)
			s.del_us = 1;
		s.ref_us = p.rtt_src ? tp->srtt_us >> 3 : ca->base_rtt_us;
		s.base_rtt_us = ca->base_rtt_us;
		s.pre_bw_q8 = ca->pre_bw_q8;
		hetcp_gtsw(&s);
		ca->gtsw_ssth = s.ssth;
		if (!(ca->flags & F_FIRST_LOSS)) {
			u32 burst = ccl_sat32(s.cur_q8 * ca->base_rtt_us / (CCL_USEC_PER_SEC << 8));

			if (burst > ca->ss_burst)
				ca->ss_burst = burst;
		}
		if (tp->snd_cwnd >= p.low_wnd) {
			u32 ssth = s.ssth;

			if (!(ca->flags & (F_FIRST_LOSS | F_SS_DONE)) &&
			    p.ss_mode == HETCP_SS_QUEUE) {
				/* slow start ends only once a queue stands */
				ssth = hetcp_ss_exit(ca->samples + 1, ca->q_run_us, (u32)now,
						     ca->base_rtt_us, tp->snd_cwnd, s.ssth,
						     ca->ss_burst, p.ssth_floor);
				if (ssth) {
					ccl_set_ssthresh(sk, ssth);
					ca->flags |= F_SS_DONE;
				}
			} else {
				if (p.ss_mode == HETCP_SS_BURST && !(ca->flags & F_FIRST_LOSS) &&
				    ca->ss_burst > ssth)
					ssth = ca->ss_burst;
				if (ca->flags & F_FIRST_LOSS)
					ssth = hetcp_ri_ssth(p.loss_bw, tp->snd_cwnd,
							     tp->snd_ssthresh, ssth, p.ssth_floor);
				else if (ssth < p.ssth_floor)
					ssth = p.ssth_floor;
				if (ssth)
					ccl_set_ssthresh(sk, ssth);
			}
		}
		ca->pre_bw_q8 = s.bw_q8;
		ca->pre_time_us = now;
		ca->ack_cnt = 0;
		ca->samples++;
		stat_inc(CCL_STAT_EST_SAMPLES);
		if (ccl_trace_due(sk, ca->samples, p))
			hetcp_emit(sk, ca, &s, si, profile);
	}

	/* +1 per segment below ssthresh (SS / RI), +1/cwnd above (CA). */
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		acked = tcp_slow_start(tp, acked);
	if (acked)
		tcp_cong_avoid_ai(tp, hetcp_ai_window(tp->snd_cwnd, ca->base_rtt_us, p.ai_rtt_ms),
				  acked);
	ccl_guard_wrote_cwnd(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(hetcp_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hetcp *ca = inet_csk_ca(sk);
	struct ccl_hetcp_params p;

	/*
	 * Fig. 2 on triple dupack: cwnd /= 2; PreBW = 0; ssthresh = 0.  With
	 * loss_bw = 1 (default) the estimate is kept (header, deviation 5).
	 */
	ccl_params(ccl_profile_of(sk), &p);
	ca->saved_bw_q8 = ca->pre_bw_q8;
	if (p.loss_bw != HETCP_LOSS_KEEP) {
		ca->pre_bw_q8 = 0;
		ca->gtsw_ssth = 0;
	}
	ca->ack_cnt = 0;
	ca->pre_time_us = tp->tcp_mstamp;
	ca->flags |= F_FIRST_LOSS | F_PENDING_CA;
	ca->losses++;
	stat_inc(CCL_STAT_LOSS_EVENTS);
	return ccl_ssth_mark(sk, tp->snd_cwnd >> 1 > 2 ? tp->snd_cwnd >> 1 : 2);
}

SEC("struct_ops")
void BPF_PROG(hetcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct hetcp *ca = inet_csk_ca(sk);
	struct ccl_hetcp_params p;

	if (ev != CA_EVENT_LOSS)
		return;
	/* RTO: keep the kernel's cwnd/2 ssthresh; keep the estimate unless told. */
	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_RTO);
	ca->flags &= ~F_PENDING_CA;
	if (!p.rto_reset)
		ca->pre_bw_q8 = ca->saved_bw_q8;
}

SEC("struct_ops")
__u32 BPF_PROG(hetcp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hetcp *ca = inet_csk_ca(sk);

	stat_inc(CCL_STAT_UNDO);
	ca->pre_bw_q8 = ca->saved_bw_q8;
	ca->flags &= ~F_PENDING_CA;
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC("struct_ops")
void BPF_PROG(hetcp_set_state, struct sock *sk, __u8 new_state)
{
	ccl_guard_state(sk, new_state);
	ccl_agg_set_state(sk, new_state); /* aggregates only: the law needs no state hook */
}

SEC(".struct_ops.link")
struct tcp_congestion_ops hetcp = {
	.init = (void *)hetcp_init,
	.release = (void *)ccl_release,
	.pkts_acked = (void *)hetcp_pkts_acked,
	.cong_avoid = (void *)hetcp_cong_avoid,
	.ssthresh = (void *)hetcp_ssthresh,
	.cwnd_event = (void *)hetcp_cwnd_event,
	.set_state = (void *)hetcp_set_state,
	.undo_cwnd = (void *)hetcp_undo_cwnd,
	.name = "hetcp",
};
