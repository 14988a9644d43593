// SPDX-License-Identifier: GPL-2.0
/*
 * ctcp_plus.bpf.c - Compound TCP with the CTCP+ early reduction.
 *
 * The send window is a loss-based Reno window plus a delay-based window:
 *
 *   swnd = cwnd + dwnd
 *   Diff = swnd (RTT - baseRTT) / RTT                 (segments queued, per RTT)
 *   dwnd += max(alpha swnd^(3/4) - 1, 0)  if Diff <  gamma
 *   dwnd  = max(dwnd - zeta Diff, 0)      if Diff >= gamma
 *   loss: cwnd /= 2, dwnd = max(swnd (1 - beta) - cwnd/2, 0); RTO: dwnd = 0
 * CTCP+ adds, when Diff >= gamma with dwnd already 0 (a loss is anticipated):
 *   (2) cwnd = floor(cwnd * 2/3) once, (3) cwnd -= 1/2 per later RTT,
 *   (4) no per-ACK increase during the episode; exit when Diff < gamma.
 *
 * Tan, Song, Zhang, Sridharan: "A Compound TCP approach for high-speed and
 * long distance networks", INFOCOM 2006; draft-sridharan-tcpm-ctcp; the
 * CTCP+ seed (Hisamatsu/Noborio group, IPSJ 2012).  How it works and why it
 * deviates: docs/ctcp_plus.md.
 *
 *   states:  CTCP --Diff >= gamma && dwnd == 0 (competing: once per loss,
 *            after dwnd grew)--> EP (rule 2, then 3 per RTT,
 *            no per-ACK growth) --Diff < gamma_exit or loss--> CTCP
 *            EP --competing: ep_rounds rounds at Diff >= gamma, or Diff <
 *            gamma_exit with the queue kept--> YIELD (cut undone, Reno
 *            growth) --loss--> CTCP
 *            any --new probe_ms slot--> PROBE (hold the pipe 4 rounds; judge
 *            the queue: competing or not) --> CTCP
 *
 * Deviations from the paper, each explained with its measurement in
 * docs/ctcp_plus.md, "How ccload reads it" unless named otherwise:
 *  1. The round's RTT is its minimum sample, from min_samples samples, and
 *     the delay component runs above low_wnd (the Linux compound patch).
 *  2. The CTCP+ trigger and rules (2)-(4) are reconstructed from the seed's
 *     surviving formulas.
 *  3. swnd^(3/4) = sqrt(w sqrt(w)) with integer square roots.
 *  4. TUBE on, the round's mean RTT and zeta 2 by default ("Shallow
 *     buffers: why the defaults differ from Compound's").
 *  5. keep_pipe: the brake and rule (2) stop at the pipe ("The early cut and
 *     the pipe").
 *  6. low_wnd 0, a plateau crossed in time, and a random loss that keeps the
 *     pipe ("Buffers of about 10 packets at 100 Mbit/s", "Random loss with
 *     a short queue").
 *  7. Synchronised probes, one episode per loss, and episodes that yield to
 *     another sender's queue ("Sharing a link").
 *  8. One TUBE gamma per path (gamma_tune 2; 1 = the paper's) ("Sharing a
 *     link").
 */
#include "ccload.bpf.h"
#include "core/ctcp_core.h"

char _license[] SEC("license") = "GPL";

#define CCL_PARAMS struct ccl_ctcp_plus_params
#define CCL_PARAMS_TABLE CCL_CTCP_PLUS_PARAMS
#include "ccload_maps.bpf.h"

/* Per-flow state (the 104 bytes of icsk_ca_priv). */
struct ctcp_plus {
	u32 cwnd_l;		/* loss window, segments */
	u32 cwnd_l_frac;	/* Q10 remainder of cwnd_l (rule 3) */
	u32 cwnd_cnt;		/* AI counter for +1/swnd per segment */
	u32 dwnd_q10;		/* delay window, segments x 1024 */
	u32 grow_q10;		/* spread: dwnd growth of this round, Q10 */
	u32 w_loss;		/* plateau: swnd at the last loss */
	u32 last_rtt_us;	/* rand_keep: the last round's RTT (rtt_mode) */
	u32 rtt_max_us;		/* rand_keep: the largest round RTT */
	u32 rate_max;		/* rand_keep: the best round rate, segments/s */
	u32 base_rtt_us;	/* min RTT ever, us (+1 so 0 means none) */
	u32 round_min_us;	/* min RTT sample this round */
	u32 round_sum_us;	/* sum of this round's samples (rtt_mode 1) */
	u32 cnt_rtt;		/* samples this round */
	struct ccl_round round; /* round tracker */
	u32 beg_snd_una;	/* snd_una at the round start (win_mode 1, rand_keep) */
	u32 beg_snd_nxt;	/* snd_nxt at the round start (win_mode 1, rand_keep) */
	u32 last_cwnd;		/* external-change sync */
	u32 gamma;		/* current gamma (tuning) */
	s32 diff_reno_q10;	/* for gamma tuning, -1 = invalid */
	u16 n_cut2, n_dec3;	/* telemetry counters (wrap) */
	u32 losses;
	u32 ref_cl;    /* probe_ms: the loss window at the first episode since the loss */
	u32 ep_cwnd_l; /* cwnd_l before the episode's cut (ep_rounds) */
	u32 ep_q_us;   /* queueing delay at the cut (ep_rounds) */
	u8 ep;
	u8 eps;	  /* episodes since the last loss (ep_per_loss) */
	u8 flags; /* CTCP_F_* */
	u8 slot;  /* low 8 bits of the probe slot last seen (CTCP_F_SLOT) */
};

/* ctcp_plus.flags */
enum {
	CTCP_F_ENABLED = 1,	/* the delay component runs (Open) */
	CTCP_F_GREW = 2,	/* dwnd grew since the last loss (ep_per_loss) */
	CTCP_F_COMP = 4,	/* competing (probe_ms) */
	CTCP_F_SLOT = 8,	/* slot is known */
	CTCP_F_PROBE_SHIFT = 4, /* bits 4-5: probe rounds left */
	CTCP_F_PROBE = 3 << 4,
	CTCP_F_SINCE_SHIFT = 6, /* bits 6-7: probes ended since the last loss */
	CTCP_F_SINCE = 3 << 6,
};

_Static_assert(sizeof(struct ctcp_plus) <= CCL_CA_PRIV_SIZE, "ctcp state must fit icsk_ca_priv");

/* gamma_tune 2: one TUBE gamma per path (ctcp_tube), forgotten
 * CTCP_PATH_TTL_S after its last write. */
struct ctcp_path {
	u32 gamma;
	u32 t_s; /* ktime, s, of the last write */
};

#define CTCP_PATH_TTL_S 60

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ccl_path_key);
	__type(value, struct ctcp_path);
} ctcp_paths SEC(".maps");

/* The path's gamma if it has a fresh one, else `own`. */
static __always_inline u32 ctcp_path_gamma(const struct ccl_path_key *k, u32 own)
{
	struct ctcp_path *v = bpf_map_lookup_elem(&ctcp_paths, k);

	return v && ccl_now_s() - v->t_s < CTCP_PATH_TTL_S && v->gamma ? v->gamma : own;
}

/* TUBE on the path's gamma (or `own`, the flow's, when it has none fresh);
 * the result is the path's.  Returns it. */
static __always_inline u32 ctcp_path_tube(struct sock *sk, u32 own, s32 diff_reno_q10)
{
	struct ccl_path_key k = {};
	struct ctcp_path v = {};

	ccl_path_key_of(sk, &k);
	v.gamma = ctcp_tube(ctcp_path_gamma(&k, own), diff_reno_q10);
	v.t_s = ccl_now_s();
	bpf_map_update_elem(&ctcp_paths, &k, &v, BPF_ANY);
	return v.gamma;
}

static __always_inline void ctcp_plus_rearm(struct tcp_sock *tp, struct ctcp_plus *ca)
{
	ca->beg_snd_una = tp->snd_una;
	ca->beg_snd_nxt = tp->snd_nxt;
	ccl_round_reset(&ca->round, tp->snd_nxt);
	ca->cnt_rtt = 0;
	ca->round_sum_us = 0;
	ca->round_min_us = CCL_U32_MAX;
}

SEC("struct_ops")
void BPF_PROG(ctcp_plus_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ctcp_plus *ca = inet_csk_ca(sk);
	struct ccl_ctcp_plus_params p;

	ccl_params(ccl_profile_of(sk), &p);
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->cwnd_l = tp->snd_cwnd;
	ca->last_cwnd = tp->snd_cwnd;
	ca->base_rtt_us = CCL_U32_MAX;
	ca->gamma = p.gamma;
	ca->diff_reno_q10 = -1;
	ca->flags = CTCP_F_ENABLED;
	ctcp_plus_rearm(tp, ca);
	ccl_flow_init(sk);
}

SEC("struct_ops")
void BPF_PROG(ctcp_plus_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct ctcp_plus *ca = inet_csk_ca(sk);
	u32 v;

	ccl_guard(sk);
	ccl_agg_ack(sk);
	if (!(ca->flags & CTCP_F_ENABLED) || sample->rtt_us <= 0)
		return;
	v = (u32)sample->rtt_us + 1;
	if (v < ca->base_rtt_us)
		ca->base_rtt_us = v;
	if (v < ca->round_min_us)
		ca->round_min_us = v;
	ca->round_sum_us += v;
	ca->cnt_rtt++;
}

static __always_inline void ctcp_plus_emit(struct sock *sk, struct ctcp_plus *ca,
					   const struct ctcp_round *r, u32 rtt, u32 profile)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_event *ev;
	struct ccl_tel_ctcp *t;

	ev = ccl_event_reserve(
		sk, CCL_ALGO_CTCP_PLUS, ca->round.cnt,
		ctcp_ep_cutting(ca->ep) ?
			CCL_PHASE_EP :
			(tp->snd_cwnd < tp->snd_ssthresh ? CCL_PHASE_SS : CCL_PHASE_CA),
		profile);
	if (!ev)
		return;
	t = &ev->u.ctcp;
	t->base_rtt_us = ca->base_rtt_us != CCL_U32_MAX ? ca->base_rtt_us : 0;
	t->round_rtt_us = rtt;
	t->cnt_rtt = ca->cnt_rtt;
	t->win = r->win;
	t->diff_q10 = r->diff_q10;
	t->gamma = ca->gamma;
	t->dwnd_q10 = ca->dwnd_q10;
	t->cwnd_l = ca->cwnd_l;
	t->swnd = ca->cwnd_l + (ca->dwnd_q10 >> 10);
	t->ep = ca->ep;
	t->n_cut2 = ca->n_cut2;
	t->n_dec3 = ca->n_dec3;
	t->losses = ca->losses;
	t->rule = r->rule;
	ccl_event_submit(ev);
}

SEC("struct_ops")
void BPF_PROG(ctcp_plus_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ctcp_plus *ca = inet_csk_ca(sk);
	struct ccl_ctcp_plus_params p;
	struct ctcp_round r = {};
	u32 profile = ccl_profile_of(sk);
	u32 swnd, cw;

	ccl_params(profile, &p);
	stat_inc(CCL_STAT_ACKS);

	/* The kernel changed cwnd (PRR end, RTO, undo, idle restart). */
	if (tp->snd_cwnd != ca->last_cwnd)
		ctcp_resync(tp->snd_cwnd, &ca->cwnd_l, &ca->dwnd_q10);

	/* Loss window: slow start, else +1/swnd per segment; (4) hold in EP. */
	swnd = tp->snd_cwnd ? tp->snd_cwnd : 1;
	if (tcp_is_cwnd_limited(sk)) {
		if (tp->snd_cwnd < tp->snd_ssthresh) {
			ca->cwnd_l += acked;
			ca->dwnd_q10 = 0;
		} else if (!(p.plus && (ctcp_ep_cutting(ca->ep) || (ca->flags & CTCP_F_PROBE)))) {
			ca->cwnd_cnt += acked;
			if (ca->cwnd_cnt >= swnd) {
				ca->cwnd_l += ca->cwnd_cnt / swnd;
				ca->cwnd_cnt %= swnd;
			}
			ca->dwnd_q10 = ctcp_spread_ack(ca->dwnd_q10, ca->grow_q10, acked, swnd);
		}
	}

	/* Once per RTT, the delay window and the CTCP+ rules. */
	if (ccl_round_on_seq(&ca->round, ack, tp->snd_nxt)) {
		u32 rtt = p.rtt_mode && ca->cnt_rtt ? ca->round_sum_us / ca->cnt_rtt :
						      ca->round_min_us;
		/* the data this round's ACKs acknowledged, in segments */
		u32 sent = ctcp_round_sent(ca->beg_snd_una, ca->beg_snd_nxt, tp->mss_cache);

		stat_inc(CCL_STAT_ROUNDS);
		/* rand_keep's evidence, from rounds with min_samples samples. */
		if (ca->cnt_rtt >= p.min_samples && rtt != CCL_U32_MAX) {
			ca->last_rtt_us = rtt;
			ctcp_rtt_max_update(&ca->rtt_max_us, &ca->rate_max, sent, rtt);
		}
		r.rule = 0;
		ca->grow_q10 = 0;
		/* gamma_tune 2: the path's gamma, as the flows to it last tuned it */
		if (p.gamma_tune == 2) {
			struct ccl_path_key k = {};

			ccl_path_key_of(sk, &k);
			ca->gamma = ctcp_path_gamma(&k, ca->gamma);
		}
		if ((ca->flags & CTCP_F_ENABLED) && ca->cnt_rtt >= p.min_samples &&
		    tp->snd_cwnd >= tp->snd_ssthresh && ca->cwnd_l >= p.low_wnd &&
		    ca->base_rtt_us != CCL_U32_MAX) {
			r.win = p.win_mode ? sent : swnd;
			r.rtt_us = rtt;
			r.base_rtt_us = ca->base_rtt_us;
			r.gamma = ca->gamma;
			r.swnd = swnd;
			r.w_loss = ca->w_loss;
			r.cwnd_l = ca->cwnd_l;
			r.cwnd_l_frac = ca->cwnd_l_frac;
			r.dwnd_q10 = ca->dwnd_q10;
			r.ep = ca->ep;
			r.ep_cwnd_l = ca->ep_cwnd_l;
			r.ep_q_us = ca->ep_q_us;
			r.eps = ca->eps;
			r.dw_grew = !!(ca->flags & CTCP_F_GREW);
			/* probe_ms: a probe keeps its floor and window in the
			 * episode's fields (no episode starts during a probe) */
			r.rtt_max_us = ca->rtt_max_us;
			r.round_min_us = ca->round_min_us;
			r.now_ms = (u32)(tp->tcp_mstamp / 1000);
			r.slot = (ca->flags & CTCP_F_SLOT) ? ca->slot : CTCP_SLOT_NONE;
			r.probe = (ca->flags & CTCP_F_PROBE) >> CTCP_F_PROBE_SHIFT;
			r.probe_min_us = ca->ep_q_us;
			r.probe_w = ca->ep_cwnd_l;
			r.comp = !!(ca->flags & CTCP_F_COMP);
			r.ref_cl = ca->ref_cl;
			r.probes_since_loss = (ca->flags & CTCP_F_SINCE) >> CTCP_F_SINCE_SHIFT;
			ctcp_round_update(&r, &p);
			ca->ref_cl = r.ref_cl;
			ca->eps = r.eps > 255 ? 255 : (u8)r.eps;
			ca->flags &= CTCP_F_ENABLED;
			if (r.dw_grew)
				ca->flags |= CTCP_F_GREW;
			if (r.comp)
				ca->flags |= CTCP_F_COMP;
			if (r.slot != CTCP_SLOT_NONE) {
				ca->flags |= CTCP_F_SLOT;
				ca->slot = (u8)r.slot;
			}
			ca->flags |= (u8)((r.probe & 3) << CTCP_F_PROBE_SHIFT);
			ca->flags |= (u8)((r.probes_since_loss & 3) << CTCP_F_SINCE_SHIFT);
			if (r.probe) {
				ca->ep_cwnd_l = r.probe_w;
				ca->ep_q_us = r.probe_min_us;
			} else {
				ca->ep_cwnd_l = r.ep_cwnd_l;
				ca->ep_q_us = r.ep_q_us;
			}
			ca->cwnd_l = r.cwnd_l;
			ca->cwnd_l_frac = r.cwnd_l_frac;
			ca->dwnd_q10 = r.dwnd_q10;
			ca->ep = r.ep;
			ca->grow_q10 = r.grow_q10;
			ca->diff_reno_q10 = (s32)r.diff_reno_q10;
			/*
			 * The early cut and decrease set ssthresh to the new
			 * window: ssthresh still held slow start's loss, and
			 * cong_avoid slow-started the cut back within a round
			 * (cwnd 327 -> 212 -> 318 every two rounds).
			 */
			if ((r.rule & (CCL_CTCP_CUT2 | CCL_CTCP_DEC3)) || r.probe)
				ccl_set_ssthresh(sk, ca->cwnd_l > 2 ? ca->cwnd_l : 2);
			if (r.rule & CCL_CTCP_CUT2) {
				ca->n_cut2++;
				stat_inc(CCL_STAT_EARLY_CUTS);
			}
			if (r.rule & CCL_CTCP_DEC3) {
				ca->n_dec3++;
				stat_inc(CCL_STAT_EARLY_DECS);
			}
		}
		if (ccl_trace_due(sk, ca->round.cnt, p))
			ctcp_plus_emit(sk, ca, &r, rtt != CCL_U32_MAX ? rtt : 0, profile);
		ctcp_plus_rearm(tp, ca);
	}

	/* The kernel's window: loss window + delay window, within the clamp. */
	cw = ca->cwnd_l + (ca->dwnd_q10 >> 10);
	if (cw < 2)
		cw = 2;
	tp->snd_cwnd = cw < tp->snd_cwnd_clamp ? cw : tp->snd_cwnd_clamp;
	ccl_guard_wrote_cwnd(sk);
	ca->last_cwnd = tp->snd_cwnd;
}

/* What a loss (dupack or RTO) ends: an episode, the count of episodes and
 * dwnd's growth since the last loss, a probe and the probes since a loss. */
static __always_inline void ctcp_plus_loss_reset(struct ctcp_plus *ca)
{
	ca->ep = 0;
	ca->eps = 0;
	ca->grow_q10 = 0;
	ca->flags &= ~(CTCP_F_GREW | CTCP_F_PROBE | CTCP_F_SINCE);
}

SEC("struct_ops")
__u32 BPF_PROG(ctcp_plus_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ctcp_plus *ca = inet_csk_ca(sk);
	struct ccl_ctcp_plus_params p;
	u32 ssth, floor, w;

	ccl_params(ccl_profile_of(sk), &p);
	stat_inc(CCL_STAT_LOSS_EVENTS);
	ca->losses++;
	/* The kernel's window may be newer than the split (Recovery entered
	 * again on the ACK that ended it, before cong_avoid): halve that one. */
	if (tp->snd_cwnd != ca->last_cwnd) {
		ctcp_resync(tp->snd_cwnd, &ca->cwnd_l, &ca->dwnd_q10);
		ca->last_cwnd = tp->snd_cwnd;
	}
	/* in a probe, the window from before it (its probe_w is ep_cwnd_l) */
	w = ctcp_loss_window(tp->snd_cwnd, ca->flags & CTCP_F_PROBE, ca->ep_cwnd_l);
	if (w != tp->snd_cwnd) {
		ca->cwnd_l = w;
		ca->dwnd_q10 = 0;
	}
	floor = ctcp_loss_floor(w, ca->last_rtt_us, ca->rtt_max_us, ca->base_rtt_us, &p);
	if (floor) {
		/*
		 * A random loss shows neither the buffer (TUBE would learn a
		 * gamma from whatever the flow had queued: 5, the floor, at
		 * 100M/10ms/1BDP/1e-4) nor the window where it overflows
		 * (the plateau's w_loss): both keep what the last congestive
		 * loss taught.
		 */
		stat_inc(CCL_STAT_LOSS_RANDOM);
		ca->diff_reno_q10 = -1;
	} else {
		/* TUBE: gamma += (0.75 diff_reno - gamma) / 2, clipped to [5, 30]. */
		if (p.gamma_tune && ca->diff_reno_q10 >= 0) {
			ca->gamma = p.gamma_tune == 2 ?
					    ctcp_path_tube(sk, ca->gamma, ca->diff_reno_q10) :
					    ctcp_tube(ca->gamma, ca->diff_reno_q10);
			ca->diff_reno_q10 = -1;
		}
		ca->w_loss = w;
	}
	ssth = ctcp_loss(w, p.beta_q10, floor, &ca->cwnd_l, &ca->dwnd_q10);
	ctcp_plus_loss_reset(ca);
	ca->ref_cl = 0;
	ca->cwnd_cnt = 0;
	return ccl_ssth_mark(sk, ssth);
}

SEC("struct_ops")
void BPF_PROG(ctcp_plus_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ctcp_plus *ca = inet_csk_ca(sk);

	if (ev == CA_EVENT_LOSS) {
		stat_inc(CCL_STAT_RTO);
		ca->dwnd_q10 = 0; /* timeout: dwnd = 0; cwnd_l re-synced in cong_avoid */
		ctcp_plus_loss_reset(ca);
	} else if (ev == CA_EVENT_TX_START || ev == CA_EVENT_CWND_RESTART) {
		ctcp_plus_rearm(tp, ca); /* keep base_rtt */
	}
}

SEC("struct_ops")
void BPF_PROG(ctcp_plus_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ctcp_plus *ca = inet_csk_ca(sk);
	u8 en = new_state == TCP_CA_Open;

	ccl_guard_state(sk, new_state);
	ccl_agg_set_state(sk, new_state);
	if (en && !(ca->flags & CTCP_F_ENABLED))
		ctcp_plus_rearm(tp, ca);
	if (en)
		ca->flags |= CTCP_F_ENABLED;
	else
		ca->flags &= ~CTCP_F_ENABLED;
}

SEC("struct_ops")
__u32 BPF_PROG(ctcp_plus_undo_cwnd, struct sock *sk)
{
	stat_inc(CCL_STAT_UNDO);
	return tcp_reno_undo_cwnd(sk); /* cong_avoid's resync re-derives the split */
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ctcp_plus = {
	.init = (void *)ctcp_plus_init,
	.release = (void *)ccl_release,
	.pkts_acked = (void *)ctcp_plus_pkts_acked,
	.cong_avoid = (void *)ctcp_plus_cong_avoid,
	.ssthresh = (void *)ctcp_plus_ssthresh,
	.cwnd_event = (void *)ctcp_plus_cwnd_event,
	.set_state = (void *)ctcp_plus_set_state,
	.undo_cwnd = (void *)ctcp_plus_undo_cwnd,
	.name = "ctcp_plus",
};
