// SPDX-License-Identifier: GPL-2.0
/*
 * ccpd.bpf.c - CCPD: Capacity and Congestion Probing, Proportional plus Derivative.
 *
 * A delay-based window law with a Smith predictor.  The sender estimates the
 * bottleneck capacity C from packet-pair ACK dispersion, and from it the pipe
 * P, the bottleneck buffer B and its occupancy x:
 *
 *   C = MSS / d                                   (Eq. 4, packet pairs)
 *   B = C * (rtt_max - rtt_min),  x = C * (rtts - rtt_min)      (Eq. 5, 6)
 *   w_k = Kp (B - x_k - F_k) + Kd/(t_k - t_{k-1}) ((x+F)_{k-1} - (x+F)_k)  (Eq. 3)
 *
 * Two laws (tunable `mode`):
 *   L0: Eq. 3 literally, per ACK, F = packets in flight: the window is bounded by
 *       the *buffer*, cwnd* = Kp (B - x) / (1 + Kp).  Kept for reproduction.
 *   L1 (default): the full-utilising reading of the Smith predictor, per round:
 *       d = w (s - m)/s,  w' = w + gamma (Kp (B - x - d) - d + D),
 *       gamma = 1 / (1 + 2 Kp); equilibrium queue x* = Kp B / (1 + 2 Kp).
 *
 * Cavendish, Ishida, Kumazoe, Tsuru, Oie, Gerla: "CCPD: a capacity and
 * congestion probing TCP with proportional plus derivative control",
 * INTERNET 2011.  How the law works, each deviation and the measurement
 * behind it: docs/ccpd.md.  The arithmetic and every hook's logic live in
 * core/ccpd_core.h (host-tested, including a closed-loop packet model); this
 * file only copies kernel fields in and the window out.
 *
 * Deviations from the paper:
 *  1. w_k is the whole congestion window; L1 is the default law.
 *  2. Kd is in ms, k counts rounds, Kd/dt is clamped to g_max.
 *  3. rtt_max is the max of the own smoothed RTT; B >= b_min.
 *  4. Capacity: tagged back-to-back pair of 2-segment units (delayed ACKs),
 *     ns ACK dispersion, CapProbe minimum RTT-sum filter per epoch, never
 *     below the delivery rate and never above 1.25x it; a pair sample not
 *     refreshed for 4 epochs expires.  Uncapped, a pair released by a token
 *     bucket at an idle start read 62,972 seg/s on an 8,333 seg/s link.
 *  5. Gain gamma = 1/(1+2Kp), not 1.5/(1+2Kp): the RTT at a round start
 *     measures the previous round's window, and with that delay 1.5/(1+2Kp)
 *     swings the queue between empty and full.
 *  6. Clamp P + B - max(2, B/8): below the path storage, not at it.
 *  7. Loss: the kernel retransmits.  Over a nearly empty queue (smoothed
 *     RTT under clamp(m/16, rtt_floor, 16 ms) above m) a loss is random.
 *     Otherwise it is congestive when the smoothed RTT shows a nearly full
 *     buffer (s >= m + 3/4 (rtt_max - m)), Recovery is re-entered within an
 *     RTT of leaving it, the window is at the clamp, or (in slow start, in
 *     place of these, which there measure the slow start itself) the RTT
 *     shows the slow-start exit's queue; or (checked in pkts_acked) the
 *     Recovery has seen a burst of 3 losses with a queue, or W/8 without:
 *     the window is then held at the L1 equilibrium window (pipe share +
 *     Kp B/(1+2Kp)), and at most P_fb + Kp (W - P_fb)/(1+2Kp) with P_fb the
 *     pipe at the delivery rate (C may read 25 % above the link, more than
 *     a BDP/8 buffer).  Otherwise (random loss) it is held as the paper
 *     says, and the law (or slow start, up to one doubling) goes on through
 *     the Recovery, fed by its RTT samples (docs/ccpd.md, "Heavy random
 *     loss").  Holding every loss locked the flow in Recovery once cwnd
 *     passed the path storage: the kernel re-enters Recovery on the ACK that
 *     ends it and ssthresh() held the same window again.  A congestive loss
 *     in CA also sets rtt_max to the smoothed RTT (bmax_on_loss = 1,
 *     default), so B follows the buffer.
 *  8. RTO: slow start back to the last law window, handled in
 *     set_state(TCP_CA_Loss), because an RTO in Recovery skips ssthresh()
 *     and CA_EVENT_LOSS (a target of 0 there gave cwnd 0).  undo_cwnd
 *     returns max(cwnd, prior_cwnd).
 *  9. Slow start and Reno AI (before C is known) grow only while the flow is
 *     cwnd-limited, as every Linux CC does (RFC 7661).  Slow start also ends
 *     on HyStart's ACK-train and delay signals (ss_exit = 1, checked in
 *     pkts_acked): waiting for the first loss retransmitted the overshoot.
 *     Paced, it also ends when every RTT sample for m/16 shows a queue of
 *     clamp(m/32, 1 ms, 4 ms): HyStart's signals, read at a round's start,
 *     come a doubling late when the round is paced (docs/ccpd.md).
 * 10. RTT noise only adds delay, and read as queue it held the window at a
 *     third of a 10-ms path with a 10-packet buffer.  The law's x and d come
 *     from the smoothed RTT less its excess over the round's smallest sample,
 *     up to q_noise (default 0.5 ms; 0 = the paper's smoothed RTT);
 *     q_rtt = 1 (the round's minimum alone) retransmits more on deeper
 *     buffers (docs/ccpd.md).
 * 11. An RTT sample is clamped to m + n / C, n = packets delivered while its
 *     packet was out (ack_sample->in_flight / mss): no queue explains more.
 *     rtt_max only grows, and one 20-ms stall of the path read as queue
 *     lifted B from 166 to 375 packets and overflowed the buffer every few
 *     rounds for the rest of the flow (4,457 retransmissions in 20 s).
 *     rtt_max also stays within Little's law for a busy path, 17/16 n / fb
 *     (fb the delivery-rate max): at 10 ms a 20-ms stall passes m + n / C
 *     and lifted B from 36 to 90 packets (standing queue 14 -> 40).
 * 12. Sharing (share = 1, default; docs/ccpd.md, "Sharing a bottleneck"):
 *     C is the pairs' running median, not capped by the flow's own rate;
 *     each flow's L1 gain is scaled by its part of the link, r / C, and
 *     half the queue of the other flows, x - d, counts again in E, so N
 *     flows keep one stable queue below the buffer; the buffer's delay
 *     rtt_max - m, the base RTT m and C (taken under half the path's, else
 *     approached by an eighth a round) are shared by the flows to one
 *     destination (ccpd_paths, below); synchronised drains every drain_ms; competitive AIMD while a
 *     drain leaves another sender's queue, until a drain finds it empty while the path's ccpd
 *     flows carried >= 3/4 C (their rates summed in ccpd_paths); competing, it grows fast
 *     while no queue shows (the competitor left).
 * 13. m is at least rtt_floor (250 us; 0 = the paper's smallest sample): on a
 *     veth pair the smallest sample, 4 us, made every packet past the first two
 *     a queue (windows of 2-13 segments, half cubic's rate, 1.1-1.9x its CPU
 *     at 1 Gbit/s).  Paths of a millisecond and more keep their own m.
 *     Under a millisecond of m, fb is the delivery rate over windows of at
 *     least 1 ms, not per ACK: with TSO/GSO and GRO one RTT holds one to
 *     three 64-KiB bursts (ccpd_rate_window).
 * 14. Paced (pace = 1): 1.2x W mss / srtt, 2x in slow start, the kernel's
 *     ratios, with SK_PACING_NEEDED (no fq needed); the ACK arming a packet
 *     pair sends its quota unpaced, and so does a flow whose srtt is under
 *     rtt_floor (ccpd_pacing_rate).  The paper's sender is unpaced, and its
 *     bursts overflowed a 10-packet buffer below the path storage
 *     (docs/ccpd.md, "Pacing").
 *
 *   state diagram (phase):
 *
 *     SS --congestive loss (hold: law target)---> CA <-------------+
 *      |  (a random loss is held; slow start and the law go on)
 *      |                                 |  congestive: target      |
 *      |                                 |  random: hold cwnd       |
 *      +--RTO--> SS_RTO --cwnd == target, Open--+------------------+
 *                  ^                         |
 *                  +----------RTO------------+
 */
#include "ccload.bpf.h"
#include "core/ccpd_core.h"

char _license[] SEC("license") = "GPL";

#define CCL_PARAMS struct ccl_ccpd_params
#define CCL_PARAMS_TABLE CCL_CCPD_PARAMS
#include "ccload_maps.bpf.h"

_Static_assert(sizeof(struct ccpd) <= CCL_CA_PRIV_SIZE, "ccpd state must fit icsk_ca_priv");

/* share: a path's buffer delay, base RTT and capacity (ccpd_path_sync), per network
 * namespace and destination address; forgotten CCPD_PATH_TTL_S after its last flow.
 * And the rates its flows carried when the last drain began (ccpd_drain). */
struct ccpd_path {
	struct ccpd_path_est est; /* buffer delay, base RTT, capacity */
	u32 t_s;		  /* ktime, s, of the last write */
	/* (64-bit: the BPF target's v1-v2 atomics are 64-bit) */
	u64 drain_slot; /* the drain_ms slot of drain_sps */
	u64 drain_sps;	/* the flows' rates when its drain began, summed, seg/s */
};

#define CCPD_PATH_TTL_S 10

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ccl_path_key);
	__type(value, struct ccpd_path);
} ccpd_paths SEC(".maps");

static __always_inline void ccpd_path_round(struct sock *sk, struct ccpd *ca)
{
	struct ccl_path_key k = {};
	struct ccpd_path *v, nv = {};
	u32 now_s = ccl_now_s();

	ccl_path_key_of(sk, &k);
	v = bpf_map_lookup_elem(&ccpd_paths, &k);
	if (v && now_s - v->t_s < CCPD_PATH_TTL_S)
		nv.est = v->est;
	if (!ccpd_path_sync(ca, &nv.est))
		return;
	/* a refresh at most once a second: one write per round is a lot of
	 * writes at a LAN's microsecond rounds */
	if (v && nv.est.qmax_us == v->est.qmax_us && nv.est.m_us == v->est.m_us &&
	    nv.est.c_sps == v->est.c_sps && now_s == v->t_s)
		return;
	nv.t_s = now_s;
	bpf_map_update_elem(&ccpd_paths, &k, &nv, BPF_ANY);
}

/* share: a drain began in `slot`: add the flow's rate `sps` to its path's
 * sum.  The first flow of a slot restarts the sum.  A flow that adds
 * between another's restart of the slot and its store is lost: the path
 * reads its sum low, and its flows compete a slot longer. */
static __noinline void ccpd_path_drain(struct sock *sk, u32 slot, u32 sps)
{
	struct ccl_path_key k = {};
	struct ccpd_path *v, nv = {};
	u64 old;

	ccl_path_key_of(sk, &k);
	v = bpf_map_lookup_elem(&ccpd_paths, &k);
	if (!v) {
		nv.t_s = ccl_now_s();
		nv.drain_slot = slot;
		nv.drain_sps = sps;
		bpf_map_update_elem(&ccpd_paths, &k, &nv, BPF_NOEXIST);
		return;
	}
	old = v->drain_slot;
	if (old != slot && __sync_val_compare_and_swap(&v->drain_slot, old, slot) == old)
		v->drain_sps = sps;
	else
		__sync_fetch_and_add(&v->drain_sps, sps);
}

/* share, draining: the sum ccpd_path_drain made for the drain in hand
 * (`slot`, its low 8 bits), or 0. */
static __noinline u32 ccpd_path_drained(struct sock *sk, u8 slot)
{
	struct ccl_path_key k = {};
	struct ccpd_path *v;

	ccl_path_key_of(sk, &k);
	v = bpf_map_lookup_elem(&ccpd_paths, &k);
	return v && (u8)v->drain_slot == slot ? ccl_sat32(v->drain_sps) : 0;
}

SEC("struct_ops")
void BPF_PROG(ccpd_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	ccpd_on_init(inet_csk_ca(sk), tp->delivered, (u32)tp->tcp_mstamp);
	ccl_flow_init(sk);
	/* TCP's own pacing (no fq needed): the rate is set in cong_control */
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
}

static __always_inline void ccpd_emit(struct sock *sk, struct ccpd *ca,
				      const struct ccl_ccpd_params *p, const struct ccpd_out *o,
				      u32 profile)
{
	const struct ccpd_law *l = &o->l;
	struct ccl_event *ev;
	struct ccl_tel_ccpd *t;

	ev = ccl_event_reserve(sk, CCL_ALGO_CCPD, ca->round.cnt, ca->phase, profile);
	if (!ev)
		return;
	t = &ev->u.ccpd;
	t->cap_sps = ca->cap_sps;
	t->fb_sps = ccpd_fb(ca);
	t->c_sps = o->c_sps;
	/* with share the pair fields hold the drain's bookkeeping */
	if (!(ca->sh & CCPD_SH_ON) && ca->best_dsum_us != CCL_U32_MAX) {
		t->pair_c_sps = ca->best_c_sps;
		t->pair_dsum_us = ca->best_dsum_us;
	}
	t->rtt_min_us = ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us : 0;
	t->rtt_max_us = ca->rtt_max_us;
	t->rtts_us = ccpd_rtts(ca);
	t->p_q10 = l->est.p_q10;
	t->b_q10 = l->est.b_q10;
	t->x_q10 = l->est.x_q10;
	/* law fields are 0 when the law did not produce this window */
	t->d_q10 = o->controlled ? l->d_q10 : 0;
	t->e_q10 = o->controlled ? l->e_q10 : 0;
	t->g_q10 = o->g_q10;
	t->dterm_q10 = o->controlled ? l->dterm_q10 : 0;
	t->delta_q10 = o->controlled ? l->delta_q10 : 0;
	t->w_q10 = ca->w_q10;
	t->cwnd_hold = ca->cwnd_hold;
	t->mode = o->law;
	t->cwnd_max = o->controlled ? l->cwnd_max : 0;
	t->loss_class = ca->last_loss;
	ccl_event_submit(ev);
}

SEC("struct_ops")
void BPF_PROG(ccpd_cong_control, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	struct ccpd_ack a = {};
	struct ccpd_out o;
	u32 profile = ccl_profile_of(sk);

	ccl_params(profile, &p);
	stat_inc(CCL_STAT_ACKS);

	a.now_ns = bpf_ktime_get_ns();
	a.now_us = (u32)tp->tcp_mstamp;
	a.ca_state = ccl_ca_state(sk);
	a.snd_cwnd = tp->snd_cwnd;
	a.cwnd_clamp = tp->snd_cwnd_clamp;
	a.in_flight = tcp_packets_in_flight(tp);
	a.mss = tp->mss_cache;
	a.acked = rs->acked_sacked;
	a.rtt_us = (s32)ccl_smax(ccl_smin(rs->rtt_us, 0x7fffffff), -1);
	a.delivered = rs->delivered > 0 ? rs->delivered : 0;
	a.interval_us = (s32)ccl_smin(rs->interval_us, 0x7fffffff);
	a.losses = rs->losses;
	a.app_limited = rs->is_app_limited;
	a.cwnd_limited = tcp_is_cwnd_limited(sk);
	a.has_prior = rs->prior_mstamp != 0;
	a.prior_delivered = rs->prior_delivered;
	a.tp_delivered = tp->delivered;
	a.snd_una = tp->snd_una;
	a.snd_nxt = tp->snd_nxt;
	/* the path's sum, read on the ACK that ends the drain only */
	if (ccpd_drain_ends(ca, a.now_us))
		a.path_sps = ccpd_path_drained(sk, ca->drain_slot);

	ccpd_on_ack(ca, &p, &a, &o);
	if (o.drain_sps)
		ccpd_path_drain(sk, o.drain_slot, o.drain_sps);

	if (o.reno_ai)
		tcp_cong_avoid_ai(tp, tp->snd_cwnd, a.acked);
	else
		tp->snd_cwnd = o.snd_cwnd;
	ccl_guard_wrote_cwnd(sk);
	if (o.ev & CCPD_EV_ROUND)
		stat_inc(CCL_STAT_ROUNDS);
	if (o.ev & CCPD_EV_PAIR_OK)
		stat_inc(CCL_STAT_PAIR_SAMPLES);
	if (o.ev & CCPD_EV_PAIR_REJECT)
		stat_inc(CCL_STAT_PAIR_REJECTS);
	if (o.losses > 0)
		stat_add(CCL_STAT_LOSS_HELD, o.losses);

	/* Paced, except the ACK that arms a packet pair: the quota it frees
	 * goes out back to back.  A flow that ccpd_pacing_rate leaves unpaced
	 * (srtt under rtt_floor) is unpaced as the kernel's CCs are: TCP's own
	 * pacing is off, and sk_pacing_rate, which TSQ and TSO autosizing
	 * read, follows their rule (the same function without the floor). */
	if (!p.pace || (o.ev & CCPD_EV_PAIR_ARMED)) {
		sk->sk_pacing_rate = ~0UL;
	} else {
		u32 srtt = tp->srtt_us >> 3, ss = ca->phase != CCL_PHASE_CA;
		u64 rate = ccpd_pacing_rate(tp->mss_cache, tp->snd_cwnd, srtt, ss, p.rtt_floor_us);

		if (rate) {
			if (sk->sk_pacing_status == SK_PACING_NONE)
				sk->sk_pacing_status = SK_PACING_NEEDED;
		} else {
			rate = ccpd_pacing_rate(tp->mss_cache, tp->snd_cwnd, srtt, ss, 0);
			if (sk->sk_pacing_status == SK_PACING_NEEDED)
				sk->sk_pacing_status = SK_PACING_NONE;
		}
		sk->sk_pacing_rate = rate ? rate : ~0UL;
	}

	/* Telemetry every round in every state. */
	if (o.round_start && ccl_trace_due(sk, ca->round.cnt, p))
		ccpd_emit(sk, ca, &p, &o, profile);
}

SEC("struct_ops")
void BPF_PROG(ccpd_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	u32 state = ccl_ca_state(sk);

	ccl_guard(sk);
	ccl_agg_ack(sk);
	ccl_params(ccl_profile_of(sk), &p);
	if (ca->sh & CCPD_SH_PATH)
		ccpd_path_round(sk, ca);
	if (state == CCL_CA_RECOVERY)
		ccpd_on_recovery_ack(ca, &p, tp->snd_cwnd_clamp);
	/* sample->in_flight is bytes: mss x the packets delivered while the
	 * sampled packet was out (tcp_clean_rtx_queue), i.e. what was in
	 * flight ahead of it when it left. */
	ccpd_on_rtt(ca, &p, state, sample->rtt_us, sample->in_flight / mss, (u32)tp->tcp_mstamp,
		    tp->snd_cwnd);
}

SEC("struct_ops")
__u32 BPF_PROG(ccpd_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	u32 hold;

	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_LOSS_EVENTS);
	hold = ccpd_on_ssthresh(ca, &p, tp->snd_cwnd, tp->snd_cwnd_clamp, (u32)tp->tcp_mstamp);
	stat_inc(ca->last_loss == CCPD_LOSS_RANDOM ? CCL_STAT_LOSS_RANDOM :
						     CCL_STAT_LOSS_CONGESTIVE);
	return ccl_ssth_mark(sk, hold);
}

SEC("struct_ops")
void BPF_PROG(ccpd_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct ccpd *ca = inet_csk_ca(sk);

	/* RTO entry is handled in set_state(TCP_CA_Loss), which runs on every
	 * RTO; CA_EVENT_LOSS does not (it is skipped in Recovery). */
	if (ev == CA_EVENT_TX_START)
		ca->e_valid = 0; /* restart after idle: derivative memory is stale */
}

SEC("struct_ops")
void BPF_PROG(ccpd_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_ccpd_params p;
	u32 target;

	ccl_guard_state(sk, new_state);
	ccl_agg_set_state(sk, new_state);
	ccl_params(ccl_profile_of(sk), &p);
	/* set_state runs before icsk_ca_state is overwritten. */
	target = ccpd_on_set_state(inet_csk_ca(sk), &p, ccl_ca_state(sk), new_state, tp->snd_cwnd,
				   (u32)tp->tcp_mstamp);
	if (target) {
		stat_inc(CCL_STAT_RTO);
		ccl_set_ssthresh(sk, target);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ccpd_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	stat_inc(CCL_STAT_UNDO);
	return ccpd_on_undo(tp->snd_cwnd, tp->prior_cwnd);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccpd = {
	.init = (void *)ccpd_init,
	.release = (void *)ccl_release,
	.cong_control = (void *)ccpd_cong_control,
	.pkts_acked = (void *)ccpd_pkts_acked,
	.ssthresh = (void *)ccpd_ssthresh,
	.cwnd_event = (void *)ccpd_cwnd_event,
	.set_state = (void *)ccpd_set_state,
	.undo_cwnd = (void *)ccpd_undo_cwnd,
	.name = "ccpd",
};
