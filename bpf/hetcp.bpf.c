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

_Static_assert(sizeof(struct hetcp) <= CCL_CA_PRIV_SIZE, "hetcp state must fit icsk_ca_priv");

CCL_INIT(hetcp_init)
{
	struct tcp_sock *tp = tcp_sk(sk);

	hetcp_on_init(inet_csk_ca(sk), tp->tcp_mstamp, tp->snd_nxt);
}

CCL_PKTS_ACKED(hetcp_pkts_acked)
{
	hetcp_on_rtt(inet_csk_ca(sk), sample->rtt_us, (u32)tcp_sk(sk)->tcp_mstamp);
}

static __always_inline void hetcp_emit(struct sock *sk, struct hetcp *ca, const struct hetcp_out *o,
				       u32 profile)
{
	struct tcp_sock *tp = tcp_sk(sk);
	const struct hetcp_sample *s = &o->s;
	struct ccl_event *ev;
	struct ccl_tel_hetcp *t;

	ev = ccl_event_reserve(sk, CCL_ALGO_HETCP, ca->round.cnt,
			       hetcp_phase(ca, tp->snd_cwnd, tp->snd_ssthresh), profile);
	if (!ev)
		return;
	t = &ev->u.hetcp;
	t->cur_bw_q8 = s->cur_q8;
	t->bw_q8 = s->bw_q8;
	t->sample_interval = o->si;
	t->ack_cnt = s->ack_cnt;
	t->del_us = s->del_us;
	t->t_ratio_q16 = s->tr_q16;
	t->bw_mbps = hetcp_bw_mbps(s->bw_q8, tp->mss_cache);
	t->gtsw_ssth = s->ssth;
	t->base_rtt_us = ca->base_rtt_us;
	t->losses = ca->losses;
	ccl_event_submit(ev);
}

CCL_CONG_AVOID(hetcp_cong_avoid)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hetcp *ca = inet_csk_ca(sk);
	struct ccl_hetcp_params p;
	struct hetcp_ack a = {};
	struct hetcp_out o;
	u32 profile = ccl_profile_of(sk);

	ccl_params(profile, &p);
	stat_inc(CCL_STAT_ACKS);
	if (ccl_round_on_seq(&ca->round, ack, tp->snd_nxt))
		stat_inc(CCL_STAT_ROUNDS);

	a.now_us = tp->tcp_mstamp;
	a.snd_cwnd = tp->snd_cwnd;
	a.snd_ssthresh = tp->snd_ssthresh;
	a.acked = acked;
	a.srtt_us = tp->srtt_us >> 3;
	hetcp_on_ack(ca, &p, &a, &o);
	if (o.ssth)
		ccl_set_ssthresh(sk, o.ssth);
	if (o.reno) {
		tcp_reno_cong_avoid(sk, ack, acked); /* no RTT sample yet */
		return;
	}
	if (o.sampled) {
		stat_inc(CCL_STAT_EST_SAMPLES);
		if (ccl_trace_due(sk, ca->samples, p))
			hetcp_emit(sk, ca, &o, profile);
	}

	/* +1 per segment below ssthresh (SS / RI), +1/cwnd above (CA). */
	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		acked = tcp_slow_start(tp, acked);
	if (acked)
		tcp_cong_avoid_ai(tp, hetcp_ai_window(tp->snd_cwnd, ca->base_rtt_us, p.ai_rtt_ms),
				  acked);
}

CCL_SSTHRESH(hetcp_ssthresh)
{
	struct ccl_hetcp_params p;

	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_LOSS_EVENTS);
	return hetcp_on_loss(inet_csk_ca(sk), &p, tcp_sk(sk)->tcp_mstamp, tcp_sk(sk)->snd_cwnd);
}

SEC("struct_ops")
void BPF_PROG(hetcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct ccl_hetcp_params p;

	if (ev != CA_EVENT_LOSS)
		return;
	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_RTO);
	hetcp_on_rto(inet_csk_ca(sk), p.rto_reset);
}

SEC("struct_ops")
__u32 BPF_PROG(hetcp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	stat_inc(CCL_STAT_UNDO);
	return hetcp_on_undo(inet_csk_ca(sk), tp->snd_cwnd, tp->prior_cwnd);
}

CCL_SET_STATE(hetcp_set_state)
{
	struct ccl_hetcp_params p;

	/* An RTO in Recovery skips CA_EVENT_LOSS: the same reset here. */
	if (!ccl_rto_skipped_loss_event(sk, new_state))
		return;
	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_RTO);
	hetcp_on_rto(inet_csk_ca(sk), p.rto_reset);
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
