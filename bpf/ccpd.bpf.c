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
 * INTERNET 2011.  The arithmetic and every hook's logic live in
 * core/ccpd_core.h (host-tested, including a closed-loop packet model); this
 * file copies kernel fields in and the window out.
 *
 * Deviations from the paper, each explained with its measurement in
 * docs/ccpd.md, "How ccload reads it" unless named otherwise:
 *  1. w_k is the whole congestion window; L1 is the default law ("The window
 *     is the whole congestion window", "Default law").
 *  2. Kd is in ms, k counts rounds, Kd/dt is clamped to g_max.
 *  3. gamma = 1/(1+2Kp), not 1.5/(1+2Kp) ("Gain").
 *  4. The law's RTT is the smoothed RTT less its noise, up to q_noise
 *     ("Which RTT measures the queue").
 *  5. Capacity from tagged pairs of 2-segment units with a CapProbe filter,
 *     within [fb, 1.25 fb] ("Capacity", "Buffers of a few packets").
 *  6. The window is clamped to P + B - max(2, B/8) ("Clamp").
 *  7. RTT samples are bounded by m + n / C and by Little's law ("RTT samples
 *     bounded by what was in flight").
 *  8. A loss is random or congestive by the RTT; a random one is held, a
 *     congestive one goes to the law's equilibrium ("Loss", "Heavy random
 *     loss").
 *  9. RTO: slow start back to the last law window, from set_state(Loss)
 *     ("Timeout").
 * 10. Slow start grows only while cwnd-limited and ends on HyStart-style
 *     signals (ss_exit) ("Slow start").
 * 11. Paced at the kernel's ratios, except a pair's quota and under
 *     rtt_floor ("Pacing").
 * 12. Flows to one destination share C, m and the buffer's delay, drain in
 *     step and compete with loss-based senders ("Sharing a bottleneck"); a
 *     drain whose queue grew met a slower link, not a sender ("A drain in a
 *     capacity dip is not a competitor").
 * 13. m >= rtt_floor, and under 1 ms of m the delivery rate is read over
 *     1-ms windows ("Paths of microseconds").
 * 14. Under 1 ms of m the law's base RTT is m plus a noise floor learned
 *     from the rounds' smallest samples while the window is under the pipe,
 *     halved on a loss, at most q_floor ("The RTT noise floor").
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
 *
 *   each ACK's mode (core/ccpd_core.h, ccpd_mode_of), by phase:
 *
 *     SS      SS (through a random loss's Recovery too)
 *     SS_RTO  SS_RTO, and the kernel's Loss from any phase
 *     CA      RENO until C and m are known, then LAW; with share,
 *             DRAIN in a drain slot's drain and COMP while competing;
 *             HOLD in a congestive Recovery (a random one runs the law)
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

CCL_INIT(ccpd_init)
{
	struct tcp_sock *tp = tcp_sk(sk);

	ccpd_on_init(inet_csk_ca(sk), tp->delivered, (u32)tp->tcp_mstamp);
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
	if (!(ca->sh & CCPD_SH_ON) && ca->cp_best_dsum_us != CCL_U32_MAX) {
		t->pair_c_sps = ca->cp_best_c_sps;
		t->pair_dsum_us = ca->cp_best_dsum_us;
	}
	t->rtt_min_us = ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us : 0;
	t->noise_us = ca->noise_us;
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

/* One ACK: the law (ccpd_on_ack), the window, pacing and telemetry, on the
 * flow's state `ca` (where it lives depends on the kernel: below). */
static __always_inline void ccpd_control(struct sock *sk, struct ccpd *ca,
					 const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
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
	a.srtt_us = tp->srtt_us >> 3;
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
	if (o.ev & CCPD_EV_ROUND)
		stat_inc(CCL_STAT_ROUNDS);
	if (o.ev & CCPD_EV_PAIR_OK)
		stat_inc(CCL_STAT_PAIR_SAMPLES);
	if (o.ev & CCPD_EV_PAIR_REJECT)
		stat_inc(CCL_STAT_PAIR_REJECTS);
	if (o.ev & CCPD_EV_FALL)
		stat_inc(CCL_STAT_CAP_FALLS);
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
		u32 srtt = ccpd_pace_rtt(tp->srtt_us >> 3, ccpd_rtts(ca));
		u32 ss = ca->phase != CCL_PHASE_CA;
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

CCL_CONG_CONTROL(ccpd_cong_control)
{
	ccpd_control(sk, inet_csk_ca(sk), rs);
}

CCL_PKTS_ACKED(ccpd_pkts_acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	u32 state = ccl_ca_state(sk);

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

CCL_SSTHRESH(ccpd_ssthresh)
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
	return hold;
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

CCL_SET_STATE(ccpd_set_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_ccpd_params p;
	u32 target;

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

/* Linux < 6.10: the same controller through cong_control(sk, rs) (it
 * reads neither ack nor flag); ccload creates this map instead of the one
 * above on such a kernel.  Those kernels' verifiers pass a global
 * subprogram (ccpd_rate_fall, ccpd_drain) a pointer to the stack, a map
 * value or memory, not into the socket, and the stack has no room for the
 * state: it goes through this CPU's scratch copy (104 bytes each way, an
 * ACK; cong_control runs to its end on one CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ccpd);
} ccpd_scratch SEC(".maps");

CCL_CONG_CONTROL_SK_RS(ccpd_cong_control)
{
	u32 zero = 0;
	struct ccpd *c = bpf_map_lookup_elem(&ccpd_scratch, &zero);

	if (!c)
		return;
	*c = *(struct ccpd *)inet_csk_ca(sk);
	ccpd_control(sk, c, rs);
	*(struct ccpd *)inet_csk_ca(sk) = *c;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccpd_sk_rs = {
	.init = (void *)ccpd_init,
	.release = (void *)ccl_release,
	.cong_control = (void *)ccpd_cong_control_sk_rs,
	.pkts_acked = (void *)ccpd_pkts_acked,
	.ssthresh = (void *)ccpd_ssthresh,
	.cwnd_event = (void *)ccpd_cwnd_event,
	.set_state = (void *)ccpd_set_state,
	.undo_cwnd = (void *)ccpd_undo_cwnd,
	.name = "ccpd",
};
