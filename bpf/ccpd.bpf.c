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
 *       gamma = 1.5 / (1 + 2 Kp); equilibrium queue x* = Kp B / (1 + 2 Kp).
 *
 * Cavendish, Ishida, Kumazoe, Tsuru, Oie, Gerla: "CCPD: a capacity and
 * congestion probing TCP with proportional plus derivative control",
 * INTERNET 2011.  Spec: ../shared/ALGORITHMS.md section 1 (normative).
 *
 * Deviations from the paper (all in the spec's interpretation register):
 *  1. w_k is the whole congestion window; L1 is the default law (spec 1.1.2).
 *  2. Kd is in ms, k counts rounds, Kd/dt is clamped to g_max (spec 1.1.3).
 *  3. rtt_max is the max of the own smoothed RTT; B >= b_min (spec 1.1.4).
 *  4. Capacity: tagged back-to-back pair, ns ACK dispersion, CapProbe minimum
 *     RTT-sum filter per epoch, never below the measured delivery rate.
 *  5. Slow start and Reno AI (before C is known) grow only while the flow is
 *     cwnd-limited, as every Linux CC does (RFC 7661); the paper is silent.
 *  6. Loss: the kernel retransmits; CCPD holds the window, estimators frozen.
 *     The first loss ends slow start and caps the hold at the path storage.
 *     RTO: slow start from 1 back to the last CCPD window.
 *
 *   state diagram (phase):
 *
 *     SS --first loss (hold <= C*rtt_max)--> CA <------------------+
 *      |                                     |  recovery: hold cwnd |
 *      +--RTO--> SS_RTO --cwnd == target, Open--+------------------+
 *                  ^                         |
 *                  +----------RTO------------+
 */
#include "ccload.bpf.h"
#include "core/ccpd_core.h"

char _license[] SEC("license") = "GPL";

CCL_DEFINE_MAPS(struct ccl_ccpd_params)
CCL_DEFINE_PARAMS_READER(ccpd_params, struct ccl_ccpd_params, CCL_CCPD_PARAMS)

enum ccpd_pair_state { PAIR_IDLE = 0, PAIR_ARMED = 1, PAIR_HALF = 2 };

#define FB_EPOCH_ROUNDS 10 /* delivery-rate max window (E2), rounds */

/* Per-flow state, in icsk_ca_priv (96 of the 104 bytes on 6.x). */
struct ccpd {
	u64 pair_t1_ns;		  /* ns time of the ACK covering the first pair unit */
	u32 cap_sps;		  /* C-hat from packet pairs, segments/s (0 = none) */
	u32 fb_cur;		  /* delivery-rate max, current 10-round epoch, seg/s */
	u32 fb_prev;		  /* ... previous epoch, seg/s */
	u32 rtt_min_us;		  /* own min of RTT samples, us */
	u32 rtt_max_us;		  /* max of own smoothed RTT, us */
	u32 rtts_q3;		  /* own smoothed RTT x 8 (gain 1/8), us */
	u32 next_round_delivered; /* round tracker: delivered count ending the round */
	u32 round_start_us;	  /* (u32) tcp_mstamp at the last round start, us */
	u32 round_cnt;		  /* rounds since init */
	u32 w_q10;		  /* CCPD window, segments x 1024 */
	s32 e_prev_q10;		  /* last error (derivative memory), segments x 1024 */
	s32 d_q10;		  /* derivative term in force, segments x 1024 */
	u32 cwnd_hold;		  /* window held in recovery, segments */
	u32 ss_target;		  /* slow-start target after RTO, segments */
	u32 pair_seq;		  /* snd_nxt when the pair was armed */
	u32 pair_rtt1_us;	  /* RTT sample of the first unit's ACK, us */
	u32 pair_round;		  /* round of the last pair attempt */
	u32 best_dsum_us;	  /* CapProbe filter: min RTT sum this epoch, us */
	u32 best_c_sps;		  /* ... and its capacity sample, segments/s */
	u32 losses_held;	  /* packets lost while holding (telemetry) */
	u8 pair_state;		  /* enum ccpd_pair_state */
	u8 phase;		  /* CCL_PHASE_SS / _CA / _SS_RTO */
	u8 e_valid;		  /* e_prev_q10 is from the previous round */
	u8 pad;
};

/* ICSK_CA_PRIV_SIZE is 104 bytes since 6.0; we need >= 6.10 (4-argument cong_control). */
_Static_assert(sizeof(struct ccpd) <= 104, "ccpd state must fit icsk_ca_priv");

/* E4: C = cap ? max(cap, fb) : fb; a capacity below a measured delivery rate
 * is impossible. */
static __always_inline u32 ccpd_capacity(const struct ccpd *ca)
{
	u32 fb = ca->fb_cur > ca->fb_prev ? ca->fb_cur : ca->fb_prev;

	return ca->cap_sps > fb ? ca->cap_sps : fb;
}

static __always_inline u32 ccpd_rtts(const struct ccpd *ca)
{
	return ca->rtts_q3 >> 3;
}

/* cwnd_max = min(snd_cwnd_clamp, C * rtt_max + cwnd_min): the whole path
 * storage (pipe + buffer); more can only overflow the buffer. */
static __always_inline u32 ccpd_cwnd_max(const struct tcp_sock *tp, const struct ccpd *ca, u32 c,
					 u32 cwnd_min)
{
	u64 m = (ccl_segs_q10(c, ca->rtt_max_us) >> 10) + cwnd_min;

	return (u32)ccl_min64(m, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
void BPF_PROG(ccpd_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	ca->rtt_min_us = CCL_U32_MAX;
	ca->best_dsum_us = CCL_U32_MAX;
	ca->phase = CCL_PHASE_SS;
	ca->next_round_delivered = tp->delivered;
	ca->round_start_us = (u32)tp->tcp_mstamp;
	stat_inc(CCL_STAT_FLOW_INIT);
}

SEC("struct_ops")
void BPF_PROG(ccpd_release, struct sock *sk)
{
	stat_inc(CCL_STAT_FLOW_RELEASE);
}

/* E1-E3: estimators, fed only in Open/Disorder (and CWR, treated as Open). */
static __always_inline void ccpd_estimators(struct sock *sk, struct ccpd *ca,
					    const struct rate_sample *rs,
					    const struct ccl_ccpd_params *p, bool round_start)
{
	struct tcp_sock *tp = tcp_sk(sk);
	long rtt = rs->rtt_us;
	u32 u = p->probe_segs * tp->mss_cache;

	/* E1: rtt_min, smoothed RTT (gain 1/8), rtt_max of the smoothed RTT. */
	if (rtt > 0) {
		u32 r = (u32)ccl_min64(rtt, 10000000);

		if (r < ca->rtt_min_us)
			ca->rtt_min_us = r;
		if (!ca->rtts_q3)
			ca->rtts_q3 = r << 3;
		else
			ca->rtts_q3 += r - (ca->rtts_q3 >> 3);
		if (ccpd_rtts(ca) > ca->rtt_max_us)
			ca->rtt_max_us = ccpd_rtts(ca);
	}

	/* E2: delivery rate dr = delivered / interval, max over 10-round epochs. */
	if (rs->interval_us > 0 && rs->delivered > 0 && !rs->is_app_limited) {
		u64 dr = (u64)rs->delivered * CCL_USEC_PER_SEC / (u64)rs->interval_us;

		if (dr > ca->fb_cur)
			ca->fb_cur = ccl_sat32(dr);
	}
	if (round_start && ca->round_cnt % FB_EPOCH_ROUNDS == 0) {
		ca->fb_prev = ca->fb_cur;
		ca->fb_cur = 0;
	}

	/* E3b: packet-pair probe.  adv = bytes acked beyond the pair's start. */
	if (ca->pair_state != PAIR_IDLE) {
		s32 adv = (s32)(tp->snd_una - ca->pair_seq);

		if (ca->round_cnt - ca->pair_round > 2) {
			ca->pair_state = PAIR_IDLE;
		} else if (ca->pair_state == PAIR_ARMED) {
			if (adv >= (s32)(2 * u)) {
				ca->pair_state = PAIR_IDLE; /* one ACK covered both */
			} else if (adv >= (s32)u) {
				ca->pair_t1_ns = bpf_ktime_get_ns();
				ca->pair_rtt1_us = rtt > 0 ? (u32)rtt : 0;
				ca->pair_state = PAIR_HALF;
			}
		} else if (adv >= (s32)(2 * u)) { /* PAIR_HALF */
			u64 d = bpf_ktime_get_ns() - ca->pair_t1_ns;

			if (adv < (s32)(3 * u) && d >= p->pair_min_ns && d > 0 && rtt > 0 &&
			    ca->pair_rtt1_us) {
				/* Eq. 4: C = MSS / d, in segments/s. */
				u64 c = (u64)p->probe_segs * CCL_NSEC_PER_SEC / d;
				u64 cmax = p->cap_max_mbps ? (u64)p->cap_max_mbps * 125000 /
								     (tp->mss_cache ?: 1)
							   : ~0ULL;
				u32 dsum = ca->pair_rtt1_us + (u32)rtt;

				if (c <= cmax) {
					stat_inc(CCL_STAT_PAIR_SAMPLES);
					/* CapProbe: keep the sample whose RTT sum is minimal. */
					if (dsum < ca->best_dsum_us) {
						ca->best_dsum_us = dsum;
						ca->best_c_sps = ccl_sat32(c);
					}
				} else {
					stat_inc(CCL_STAT_PAIR_REJECTS);
				}
			} else {
				stat_inc(CCL_STAT_PAIR_REJECTS);
			}
			ca->pair_state = PAIR_IDLE;
		}
	}

	/* E3c: every cap_epoch rounds adopt the epoch's best sample. */
	if (round_start && ca->round_cnt % p->cap_epoch == 0) {
		if (ca->best_dsum_us != CCL_U32_MAX)
			ca->cap_sps = ca->best_c_sps;
		ca->best_dsum_us = CCL_U32_MAX;
	}
}

static __always_inline void ccpd_emit(struct sock *sk, struct ccpd *ca,
				      const struct ccl_ccpd_params *p, const struct ccpd_law *l,
				      u32 c, u32 g, u32 infl, u32 profile)
{
	struct ccl_event *ev;
	struct ccl_tel_ccpd *t;

	ev = ccl_event_reserve(sk, CCL_ALGO_CCPD, ca->round_cnt, ca->phase, profile);
	if (!ev)
		return;
	t = &ev->u.ccpd;
	t->cap_sps = ca->cap_sps;
	t->fb_sps = ca->fb_cur > ca->fb_prev ? ca->fb_cur : ca->fb_prev;
	t->c_sps = c;
	t->pair_c_sps = ca->best_dsum_us != CCL_U32_MAX ? ca->best_c_sps : 0;
	t->pair_dsum_us = ca->best_dsum_us != CCL_U32_MAX ? ca->best_dsum_us : 0;
	t->rtt_min_us = ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us : 0;
	t->rtt_max_us = ca->rtt_max_us;
	t->rtts_us = ccpd_rtts(ca);
	t->p_q10 = l->est.p_q10;
	t->b_q10 = l->est.b_q10;
	t->x_q10 = l->est.x_q10;
	t->d_q10 = l->d_q10;
	t->e_q10 = l->e_q10;
	t->g_q10 = g;
	t->dterm_q10 = l->dterm_q10;
	t->delta_q10 = l->delta_q10;
	t->w_q10 = ca->w_q10;
	t->cwnd_hold = ca->cwnd_hold;
	t->losses_held = ca->losses_held;
	t->mode = p->mode;
	ccl_event_submit(ev);
}

SEC("struct_ops")
void BPF_PROG(ccpd_cong_control, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	struct ccpd_law l = {};
	u32 profile = ccl_profile_of(sk);
	u8 state = ccl_ca_state(sk);
	bool round_start = false, controlled = false;
	u32 now = (u32)tp->tcp_mstamp, dt_round = 0, infl, c, g = 0;
	u32 acked = rs->acked_sacked;

	/* C1: config (clamped), flight, round tracker. */
	ccpd_params(profile, &p);
	infl = tcp_packets_in_flight(tp);
	stat_inc(CCL_STAT_ACKS);
	if (rs->prior_mstamp && !before(rs->prior_delivered, ca->next_round_delivered)) {
		ca->next_round_delivered = tp->delivered;
		ca->round_cnt++;
		dt_round = now - ca->round_start_us;
		ca->round_start_us = now;
		round_start = true;
		stat_inc(CCL_STAT_ROUNDS);
	}

	/* C9: no pacing; keeps the probe pairs back to back. */
	sk->sk_pacing_rate = ~0UL;

	/* C2: fast recovery: hold the window; dupacks feed nothing. */
	if (state == TCP_CA_Recovery) {
		if (rs->losses > 0)
			ca->losses_held += rs->losses;
		stat_add(CCL_STAT_LOSS_HELD, rs->losses > 0 ? rs->losses : 0);
		tp->snd_cwnd = ca->cwnd_hold > p.cwnd_min ? ca->cwnd_hold : p.cwnd_min;
		/* Telemetry every round in every state: law fields are 0 here. */
		if (round_start && ccl_trace_due(ca->round_cnt, p.trace_every))
			ccpd_emit(sk, ca, &p, &l, ccpd_capacity(ca), 0, infl, profile);
		return;
	}

	/* C3: after an RTO, slow start back to the last CCPD window. */
	if (state == TCP_CA_Loss || ca->phase == CCL_PHASE_SS_RTO) {
		u32 cw = tp->snd_cwnd + acked;

		if (cw > ca->ss_target)
			cw = ca->ss_target;
		tp->snd_cwnd = cw < tp->snd_cwnd_clamp ? cw : tp->snd_cwnd_clamp;
		if (tp->snd_cwnd >= ca->ss_target && state == TCP_CA_Open) {
			ca->phase = CCL_PHASE_CA;
			ca->w_q10 = tp->snd_cwnd << 10;
			ca->e_valid = 0;
		}
		if (round_start && ccl_trace_due(ca->round_cnt, p.trace_every))
			ccpd_emit(sk, ca, &p, &l, ccpd_capacity(ca), 0, infl, profile);
		return;
	}

	/* C4: estimators (Open, Disorder, CWR). */
	ccpd_estimators(sk, ca, rs, &p, round_start);
	c = ccpd_capacity(ca);

	l.rtt_min_us = ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us : 0;
	l.rtts_us = ccpd_rtts(ca);
	l.in_flight = infl;
	l.kp_q10 = p.kp_q10;
	l.cwnd_min = p.cwnd_min;
	ccpd_estimate(c, l.rtt_min_us, ca->rtt_max_us, l.rtts_us, p.b_min, &l.est);

	if (ca->phase == CCL_PHASE_SS) {
		/* C5: plain slow start, estimators running. */
		if (tcp_is_cwnd_limited(sk)) {
			u32 cw = tp->snd_cwnd + acked;

			tp->snd_cwnd = cw < tp->snd_cwnd_clamp ? cw : tp->snd_cwnd_clamp;
		}
		ca->w_q10 = tp->snd_cwnd << 10;
	} else if (!c || l.rtt_min_us == 0) {
		/* C6: CA before any capacity estimate: Reno AI. */
		if (tcp_is_cwnd_limited(sk))
			tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
		ca->w_q10 = tp->snd_cwnd << 10;
	} else {
		controlled = true;
		l.cwnd_max = ccpd_cwnd_max(tp, ca, c, p.cwnd_min);
		l.w_q10 = ca->w_q10;
		l.e_valid = ca->e_valid;
		l.e_prev_q10 = ca->e_prev_q10;
		l.dterm_in_q10 = ca->d_q10;
		if (round_start)
			g = ccpd_gain_q10(p.kd_ms, dt_round, p.g_max_q10);
		l.g_q10 = g;

		if (p.mode == 0) {
			/* C8: literal Eq. 3, every ACK. */
			ccpd_law_l0(&l, round_start);
			if (round_start) {
				ca->e_prev_q10 = l.e_q10;
				ca->e_valid = 1;
			}
			ca->d_q10 = l.dterm_q10;
			ca->w_q10 = l.w_out_q10;
		} else if (round_start) {
			/* C7: L1, once per round; gamma auto = 1.5/(1+2Kp). */
			l.gamma_q10 = p.gamma_q10 ?: ccpd_gamma_auto_q10(p.kp_q10);
			ccpd_law_l1(&l);
			ca->e_prev_q10 = l.e_q10;
			ca->e_valid = 1;
			ca->d_q10 = l.dterm_q10;
			ca->w_q10 = l.w_out_q10;
		}
		tp->snd_cwnd = ca->w_q10 >> 10;
	}

	/* E3a: arm a packet pair when the window frees >= 2 units now; the
	 * kernel sends the freed quota back to back right after this hook. */
	if (ca->pair_state == PAIR_IDLE && ca->round_cnt - ca->pair_round >= p.probe_every &&
	    !rs->is_app_limited && tp->snd_cwnd > infl &&
	    tp->snd_cwnd - infl >= 2 * p.probe_segs) {
		ca->pair_seq = tp->snd_nxt;
		ca->pair_round = ca->round_cnt;
		ca->pair_state = PAIR_ARMED;
	}

	if (round_start && ccl_trace_due(ca->round_cnt, p.trace_every)) {
		if (!controlled) {
			l.d_q10 = 0;
			l.e_q10 = 0;
			l.dterm_q10 = 0;
			l.delta_q10 = 0;
		}
		ccpd_emit(sk, ca, &p, &l, c, g, infl, profile);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ccpd_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;
	u32 c;

	ccpd_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_LOSS_EVENTS);
	if (ca->phase == CCL_PHASE_SS) {
		/* The first loss ends slow start; holding the overshoot would
		 * keep the buffer overflowing, so cap at the path storage. */
		c = ccpd_capacity(ca);
		if (c)
			ca->cwnd_hold = (u32)ccl_min64(tp->snd_cwnd,
						       ccpd_cwnd_max(tp, ca, c, p.cwnd_min));
		else
			ca->cwnd_hold = tp->snd_cwnd / 2 > 2 ? tp->snd_cwnd / 2 : 2;
		ca->phase = CCL_PHASE_CA;
		ca->w_q10 = ca->cwnd_hold << 10;
	} else {
		ca->cwnd_hold = tp->snd_cwnd; /* [P] the window is held */
	}
	if (p.bmax_on_loss) {
		u32 s = ccpd_rtts(ca);

		ca->rtt_max_us = s > ca->rtt_min_us || ca->rtt_min_us == CCL_U32_MAX ? s : ca->rtt_min_us;
	}
	return ca->cwnd_hold > 2 ? ca->cwnd_hold : 2;
}

SEC("struct_ops")
void BPF_PROG(ccpd_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);
	struct ccl_ccpd_params p;

	if (ev == CA_EVENT_LOSS) {
		/* RTO: slow start from 1 back to the last CCPD window. */
		ccpd_params(ccl_profile_of(sk), &p);
		stat_inc(CCL_STAT_RTO);
		ca->ss_target = ca->w_q10 >> 10 > p.cwnd_min ? ca->w_q10 >> 10 : p.cwnd_min;
		ca->phase = CCL_PHASE_SS_RTO;
		ca->e_valid = 0;
		ca->pair_state = PAIR_IDLE;
		tp->snd_ssthresh = ca->ss_target;
	} else if (ev == CA_EVENT_TX_START) {
		ca->e_valid = 0; /* restart after idle: derivative memory is stale */
	}
}

SEC("struct_ops")
void BPF_PROG(ccpd_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccpd *ca = inet_csk_ca(sk);

	if (new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		ca->pair_state = PAIR_IDLE;
	/* set_state runs before icsk_ca_state is overwritten. */
	if (ccl_ca_state(sk) == TCP_CA_Recovery && new_state == TCP_CA_Open) {
		ca->w_q10 = tp->snd_cwnd << 10;
		ca->e_valid = 0;
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ccpd_undo_cwnd, struct sock *sk)
{
	stat_inc(CCL_STAT_UNDO);
	return tcp_sk(sk)->snd_cwnd; /* nothing was reduced */
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccpd = {
	.init = (void *)ccpd_init,
	.release = (void *)ccpd_release,
	.cong_control = (void *)ccpd_cong_control,
	.ssthresh = (void *)ccpd_ssthresh,
	.cwnd_event = (void *)ccpd_cwnd_event,
	.set_state = (void *)ccpd_set_state,
	.undo_cwnd = (void *)ccpd_undo_cwnd,
	.name = "ccpd",
};
