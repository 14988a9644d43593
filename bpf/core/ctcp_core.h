/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ctcp_core.h - Compound TCP / CTCP+ arithmetic core: the per-round update
 * and ssthresh, and the state machine over them, one function per hook
 * (docs/ctcp_plus.md).  Pure integer functions shared by
 * bpf/ctcp_plus.bpf.c and the host unit tests.  Windows in segments, delay
 * window and Diff in segments x 1024 (Q10), RTTs in us.
 */
#ifndef __CTCP_CORE_H
#define __CTCP_CORE_H

#include "ccl_core.h"

/* w^(3/4) = sqrt(w * sqrt(w)) with two integer square roots, x 1024.
 * Valid for w <= 2^20 segments (intermediates <= 2^50); error < 0.1 %.
 * In BPF a global subprogram: the verifier checks its 64 square-root steps
 * once, not once per path of cong_avoid (which is near its 1M-instruction
 * limit). */
CCL_CORE_GLOBAL u64 ctcp_pow34_q10(u32 w)
{
	u64 s, x = w > (1U << 20) ? (1U << 20) : w;

	s = ccl_isqrt64(x << 20);	   /* sqrt(w) * 2^10 */
	return ccl_isqrt64((x * s) << 10); /* w^0.75 * 2^10 */
}

/* Per-round state the update reads and writes. */
struct ctcp_round {
	/* in */
	u32 win;	 /* window for Diff, segments */
	u32 rtt_us;	 /* round RTT (min or mean) */
	u32 base_rtt_us; /* min RTT ever */
	u32 gamma;	 /* Diff threshold in force (gamma_tune moves it) */
	u32 swnd;	 /* send window now, segments (plateau) */
	u32 w_loss;	 /* send window at the last loss, 0 = none (plateau) */
	/* in/out */
	u32 cwnd_l;	  /* loss window, segments */
	u32 cwnd_l_frac;  /* its Q10 remainder (rule 3) */
	u32 dwnd_q10;	  /* delay window */
	u32 ep;		  /* CTCP+ episode: 0 none, 1.. its rounds, CTCP_EP_YIELD */
	u32 ep_cwnd_l;	  /* the loss window before the episode's cut */
	u32 ep_q_us;	  /* the queueing delay RTT - baseRTT at the cut */
	u32 eps;	  /* episodes started since the last loss (ep_per_loss) */
	u32 dw_grew;	  /* dwnd was above 0 at a round start since the last loss */
	u32 rtt_max_us;	  /* the largest round RTT (rand_keep's), 0 = none (probe_ms) */
	u32 round_min_us; /* the round's smallest RTT sample (probe_ms) */
	u32 now_ms;	  /* host clock, ms (probe_ms) */
	u32 slot;	  /* in/out: the probe slot last seen, CTCP_SLOT_NONE = none */
	u32 probe;	  /* in/out: probe rounds left, 0 = not probing */
	u32 probe_min_us; /* in/out: the probe's smallest round RTT */
	u32 probe_w;	  /* in/out: the send window before the probe */
	u32 comp;	  /* in/out: competing (probe_ms) */
	u32 ref_cl; /* in/out: the loss window the first episode since the loss started from (probe_ms) */
	u32 probes_since_loss; /* in/out: probes ended since the last loss, at most CTCP_LEAVE_PROBES */
	/* out */
	u32 diff_q10;	   /* Diff = win (RTT - base) / RTT */
	u32 diff_reno_q10; /* Diff of the loss window alone (gamma tuning) */
	u32 grow_q10;	   /* spread: dwnd growth to add over the next round */
	u32 rule;	   /* enum ccl_ctcp_rule bits */
};

/*
 * Once per RTT:
 *   Diff = (swnd/baseRTT - swnd/RTT) * baseRTT = swnd (RTT - baseRTT) / RTT
 *   dwnd += max(alpha swnd^(3/4) - 1, 0)       if Diff <  gamma
 *   dwnd  = max(dwnd - zeta Diff, 0)           if Diff >= gamma
 * CTCP+ (an interpretation of the paper): Diff >= gamma with dwnd already 0 (at the start of
 * the round) anticipates a loss:
 *   (2) first round of the episode: cwnd = floor(cwnd * 2/3)
 *   (3) later rounds:               cwnd = cwnd - 1/2
 *   exit when Diff < gamma_exit (default gamma).
 * With ep_per_loss > 0 (default 1) an episode starts only once the delay
 * window has grown since the last loss and the brake has taken it back to
 * 0, and (with probe_ms only while competing, ctcp_probe) only that many
 * episodes start between two losses; otherwise the loss window grows as
 * Reno's and only the delay window brakes (Compound's law).  The seed's
 * episode anticipates a loss; against a loss-based flow the loss does not
 * come, cubic's growth refills the queue, and every later episode cuts the
 * loss window again by the flow's own queue while Reno's growth gives back
 * one segment a round: the window shrinks round after round without a loss,
 * to a fraction of reno's share (docs/ctcp_plus.md, "Sharing a link").
 * Right after a loss dwnd is 0 because the loss emptied it, not the brake,
 * and cubic's queue is still there: the episode would cut the halved
 * window to a third of the one that lost.  That holds before a probe has
 * found the competitor too: leaving slow start beside cubic, the seed's
 * cut in the first round after the loss started the flow at a third of
 * its peak to cubic's 0.7, a deficit the AIMD cycles that follow carry
 * (docs/ctcp_plus.md, "Sharing a link").  Alone, a loss that leaves a
 * queue (a buffer of more than a BDP) keeps it until the next probe
 * drains it, at most probe_ms.
 * With ep_rounds > 0 (default 4; with probe_ms only while competing) an
 * episode yields when the queue is another sender's: still at Diff >=
 * gamma after the cut and ep_rounds - 1 decreases, or ending (Diff <
 * gamma_exit) with the queueing delay at half or more of what it was at
 * the cut.  The cut is undone and rules (2)-(4) rest
 * until the next loss.
 * With CTCP+ and keep_pipe = 1 (default) neither the brake nor rule (2)
 * takes the window below the pipe, swnd baseRTT/RTT = swnd - Diff: they
 * drain the queue, not the pipe.  The seed meant its cut for shallow
 * buffers, where 2/3 of the window is about the pipe, and zeta = 2 (ours,
 * for shallow buffers) gives back twice the queue.  Above BDP/8 both would
 * take the window below the pipe, the brake and the cut in the same round
 * (docs/ctcp_plus.md, "The early cut and the pipe").
 * With spread = 1 (an option, default 0) the growth is not added here: it
 * is returned in grow_q10 and added over the next round's ACKs
 * (ctcp_spread_ack), as Reno spreads its one segment, so the window does
 * not step by alpha swnd^(3/4) (3.6 segments at swnd 90) at once.
 * With plateau > 0 (default 7/8, Q10) the delay window does not grow past
 * plateau x w_loss, the send window at the last loss, in one round; the
 * zone from there to w_loss is crossed in plateau_ms (default 1 s, 0 = by
 * Reno's growth alone); above w_loss it grows again:
 *   inc = min(inc, max(plateau w_loss - swnd, 0) + (1 - plateau) w_loss RTT / T)
 *                                                     if swnd < w_loss
 * (CUBIC's plateau around W_max, on the delay window only, in time).  Where
 * the buffer is no larger than RTT noise the brake cannot see the queue and
 * the loss comes first; without the plateau dwnd's growth is fastest right
 * below the window that lost, so the flow lost more often than Reno from
 * the same window (docs/ctcp_plus.md, "Buffers of about 10 packets").  In
 * time, not rounds: a zone crossed at Reno's segment a round takes 19
 * times longer at 190 ms than at 10 ms, and long paths are where losses
 * are random.
 */
/* ep: the episode met a queue it did not make (ep_rounds) */
#define CTCP_EP_YIELD 255
#define CTCP_SLOT_NONE 0xffffffffU
#define CTCP_PROBE_ROUNDS 3    /* rounds held after the cut; the last two read the queue */
#define CTCP_COMP_ENTER_US 500 /* a probe's queue above max(qmax/8, this): competing */
#define CTCP_COMP_EXIT_US 250  /* ... at most max(qmax/16, this): not competing */
#define CTCP_LEAVE_PROBES 2    /* ... from the third probe after a loss on */

/* Would a probe at this RTT hold the window for more than a quarter of
 * its slot (CTCP_PROBE_ROUNDS rounds)?  A round without samples: no. */
CCL_CORE bool ctcp_probe_too_long(u32 rtt_us, u32 probe_ms)
{
	/* CTCP_PROBE_ROUNDS x RTT > probe_ms / 4 */
	return rtt_us != CCL_U32_MAX && (u64)CTCP_PROBE_ROUNDS * rtt_us * 4 > (u64)probe_ms * 1000;
}

/*
 * probe_ms (default 2000): which law the episodes follow.  Among ctcp_plus
 * flows the seed's episodes share well (each flow cuts on its own Diff,
 * whatever its RTT) but against a loss-based flow they starve;
 * ep_per_loss and ep_rounds hold what reno holds against cubic, but among
 * ctcp_plus flows they are Reno's AIMD, unfair to the longer RTT
 * (docs/ctcp_plus.md, "Sharing a link").  So every probe_ms of the
 * host clock each flow, at its first round in the new slot, holds its pipe
 * swnd baseRTT/RTT (no growth) for CTCP_PROBE_ROUNDS more rounds, ending
 * any episode: every ctcp_plus flow on the host drains its own queue in
 * the same round or two, and the smallest round RTT of the probe shows
 * what stays.  A queue above max(qmax/8, 0.5 ms) is another sender's: the
 * flow competes (ep_per_loss and ep_rounds apply) and gets its window from
 * before the probe back; one at most max(qmax/16, 0.25 ms) ends competing
 * (the seed's episodes), from the third probe after a loss on: a loss that
 * both flows took empties the queue for a few seconds, and a probe then
 * would read reno's or cubic's queue as gone, and the seed's episodes cut
 * the flow while reno grows.  qmax = RTTmax - baseRTT, rand_keep's largest
 * queue.  As ccpd's drains (docs/ccpd.md, "Sharing a bottleneck").  The
 * bound is an eighth of qmax and a probe comes every 2 s: at a quarter and
 * every 5 s, a cubic's queue that is still growing stays under the bound
 * for seconds while the seed's episodes cut the flow.
 * Returns true while probing (the round's law is skipped).
 */
CCL_CORE bool ctcp_probe(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p)
{
	u32 slot, rtt, qmax, q, enter, leave, grown = 0;

	if (!p->probe_ms) {
		r->probe = 0;
		r->comp = 0;
		return false;
	}
	slot = r->now_ms / p->probe_ms;
	if (r->probe) {
		if (r->round_min_us < r->probe_min_us)
			r->probe_min_us = r->round_min_us;
		r->rule |= CCL_CTCP_PROBE;
		if (--r->probe)
			return true;
		qmax = r->rtt_max_us > r->base_rtt_us ? r->rtt_max_us - r->base_rtt_us : 0;
		q = r->probe_min_us > r->base_rtt_us ? r->probe_min_us - r->base_rtt_us : 0;
		enter = qmax / 8 > CTCP_COMP_ENTER_US ? qmax / 8 : CTCP_COMP_ENTER_US;
		leave = qmax / 16 > CTCP_COMP_EXIT_US ? qmax / 16 : CTCP_COMP_EXIT_US;
		if (qmax && r->probe_min_us != CCL_U32_MAX) {
			if (q > enter) {
				r->comp = 1;
				grown = CTCP_PROBE_ROUNDS;
			} else if (q <= leave && r->comp &&
				   r->probes_since_loss >= CTCP_LEAVE_PROBES) {
				r->comp = 0;
				r->ref_cl = 0;
			}
		}
		if (r->probes_since_loss < CTCP_LEAVE_PROBES)
			r->probes_since_loss++;
		/* Competing, the window from before the probe comes back; the
		 * competitor took the drained queue at once.  If the queue stayed
		 * through the probe, with Reno's segment for each round held: the
		 * competitor kept growing meanwhile, and without them the flow
		 * falls behind a reno by the probe's rounds each cycle.  A queue
		 * that drained was other ctcp_plus flows' (or a loss's): no
		 * growth, or a flow wrongly competing outgrows them.  Otherwise
		 * the law regrows from the pipe into the emptied queue. */
		if (r->comp && r->probe_w + grown > r->cwnd_l + (r->dwnd_q10 >> 10)) {
			r->cwnd_l = r->probe_w + grown;
			r->cwnd_l_frac = 0;
			r->dwnd_q10 = 0;
		} else if (!r->comp && p->probe_keep) {
			/* probe_keep: alone (or among ctcp_plus flows), the
			 * queue Compound keeps, gamma, comes back at once,
			 * at most what the probe drained */
			u32 w = r->cwnd_l + (r->dwnd_q10 >> 10);
			u32 q = r->probe_w > w ? r->probe_w - w : 0;

			q = q < r->gamma ? q : r->gamma;
			r->dwnd_q10 += q << 10;
		}
		return true;
	}
	if (r->slot == CTCP_SLOT_NONE) {
		r->slot = slot;
		return false;
	}
	/* (the BPF state keeps a slot's low 8 bits) */
	if ((slot & 0xff) == (r->slot & 0xff))
		return false;
	rtt = r->rtt_us > r->base_rtt_us ? r->rtt_us : r->base_rtt_us;
	/* A slot whose probe would hold the window for more than a quarter
	 * of it, CTCP_PROBE_ROUNDS rounds at this RTT, is skipped: on a
	 * cellular link at RTTs of 200-500 ms each probe held the pipe for
	 * 0.6-1.5 s of every 2 (mmWave log, 80 ms, 1 BDP: 0.32x reno).
	 * Flows sharing a queue see the same RTT and skip the same slots. */
	if (ctcp_probe_too_long(rtt, p->probe_ms)) {
		r->slot = slot;
		return false;
	}
	/* A new slot: hold the pipe, swnd baseRTT/RTT, for the probe.  It ends
	 * an episode (and a yield): a flow that skipped the probe kept its
	 * queue through the others' probe, and they would read it as another
	 * sender's and compete with each other. */
	r->slot = slot;
	r->ep = 0;
	r->probe = CTCP_PROBE_ROUNDS;
	r->probe_min_us = CCL_U32_MAX;
	r->probe_w = r->swnd;
	{
		u64 pipe = rtt ? (u64)r->swnd * r->base_rtt_us / rtt : r->swnd;

		/* never below half the window, a loss's cut: a round RTT
		 * from a cellular link's outage (686 ms on a 41-ms path)
		 * made the pipe 2 segments of 29 */
		pipe = ccl_max64(pipe, r->swnd / 2);
		r->cwnd_l = pipe > 2 ? (u32)pipe : 2;
		r->cwnd_l_frac = 0;
		r->dwnd_q10 = 0;
	}
	r->rule |= CCL_CTCP_PROBE;
	return true;
}

/* In an episode that still cuts: rules (2)-(4) apply. */
CCL_CORE bool ctcp_ep_cutting(u32 ep)
{
	return ep && ep != CTCP_EP_YIELD;
}

/* The episode yields: its cut is undone, and rules (2)-(4) rest until a
 * loss (ctcp_round_update, ep_rounds). */
CCL_CORE void ctcp_ep_yield(struct ctcp_round *r)
{
	if (r->ep_cwnd_l > r->cwnd_l) {
		r->cwnd_l = r->ep_cwnd_l;
		r->cwnd_l_frac = 0;
	}
	r->ep = CTCP_EP_YIELD;
	r->rule |= CCL_CTCP_YIELD;
}

/*
 * Compound's delay window, once a round:
 *   dwnd += max(alpha win^(3/4) - 1, 0)   if Diff <  gamma (plateau: at most
 *                                          the room below w_loss's knee)
 *   dwnd  = max(dwnd - zeta Diff, 0)      if Diff >= gamma (keep_pipe: not
 *                                          below the pipe less cwnd_l)
 */
CCL_CORE void ctcp_dwnd_rule(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p, u64 diff,
			     u32 rtt, bool keep)
{
	u64 gamma_q10 = (u64)r->gamma << 10;

	if (diff < gamma_q10) {
		u64 inc = ctcp_pow34_q10(r->win) * p->alpha_q10 >> 10;

		if (p->plateau_q10 && r->swnd < r->w_loss) {
			u64 knee = (u64)r->w_loss * p->plateau_q10;
			u64 room = knee > ((u64)r->swnd << 10) ? knee - ((u64)r->swnd << 10) : 0;

			/* plateau_ms: zone = w_loss - knee, crossed in T:
			 * room += zone RTT / T this round */
			if (p->plateau_ms)
				room += (((u64)r->w_loss << 10) - knee) * rtt /
					((u64)p->plateau_ms * 1000);
			inc = ccl_min64(inc, room + 1024);
		}
		if (inc > 1024) {
			if (p->spread)
				r->grow_q10 = ccl_sat32(inc - 1024);
			else
				r->dwnd_q10 = ccl_sat32((u64)r->dwnd_q10 + inc - 1024);
			r->rule |= CCL_CTCP_GROW;
		}
	} else {
		u64 sub = diff * p->zeta_q10 >> 10;
		u64 d = r->dwnd_q10 > sub ? r->dwnd_q10 - sub : 0;

		if (keep) {
			/* dwnd >= pipe - cwnd_l, never raised by it */
			u64 pipe = ((u64)r->win << 10) - ccl_min64(diff, (u64)r->win << 10);
			u64 cl = (u64)r->cwnd_l << 10;
			u64 fl = pipe > cl ? pipe - cl : 0;

			d = ccl_max64(d, ccl_min64(fl, r->dwnd_q10));
		}
		r->dwnd_q10 = (u32)d;
		r->rule |= CCL_CTCP_SHRINK;
	}
}

/*
 * probe_ms, not competing: an episode whose loss window is below 7/8
 * of the one the first episode since the loss (or since competing
 * ended) started from means another sender takes the room each cut
 * leaves: compete now, not at the next probe.  A sender that grows
 * into the link without yet keeping a queue (cubic in its first
 * seconds) passes the probes while the seed's episodes shrink the
 * loss window without a loss; among ctcp_plus flows the window only
 * swings around a level.  A wrong call lasts until the next probe.
 * Returns whether it switched competing on.
 */
CCL_CORE bool ctcp_competing_seen(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p,
				  bool high)
{
	if (p->probe_ms && !r->comp && high && !r->ep) {
		if (!r->ref_cl) {
			r->ref_cl = r->cwnd_l;
		} else if ((u64)r->cwnd_l * 8 < (u64)r->ref_cl * 7) {
			r->comp = 1;
			r->ref_cl = 0;
			r->rule |= CCL_CTCP_COMP;
			return true;
		}
	}
	return false;
}

/*
 * CTCP+'s episode, rules (2)-(4): Diff >= gamma with dwnd given back cuts
 * the loss window (2) and then decreases it a round at a time (3) until
 * Diff falls under gamma (4); with `limit` (ep_per_loss, ep_rounds) an
 * episode whose queue outlasts it yields to the sender that keeps it.
 */
CCL_CORE void ctcp_episode(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p, u64 diff,
			   u64 q, bool high, bool limit, bool keep)
{
	if (high && r->ep != CTCP_EP_YIELD &&
	    (r->ep || !p->ep_per_loss || (r->dw_grew && (!limit || r->eps < p->ep_per_loss)))) {
		if (!r->ep) {
			u64 c = (u64)r->cwnd_l * p->plus_md_q10 >> 10;
			u64 pipe = ((u64)r->cwnd_l << 10) -
				   ccl_min64(r->diff_reno_q10, (u64)r->cwnd_l << 10);

			r->ep_cwnd_l = r->cwnd_l;
			r->ep_q_us = (u32)q;

			if (keep && (pipe >> 10) > c)
				c = pipe >> 10;
			r->cwnd_l = c > 2 ? (u32)c : 2;
			r->cwnd_l_frac = 0;
			r->ep = 1;
			r->eps++;
			r->rule |= CCL_CTCP_CUT2;
		} else if (limit && p->ep_rounds && r->ep >= p->ep_rounds) {
			/*
			 * The queue outlasted the cut and ep_rounds rounds of
			 * decrease: another sender keeps it (a loss-based flow
			 * that does not back off from delay).  Cutting on would
			 * hand it the link, -1/2 a round against its growth, so
			 * the cut is undone and the loss window is Reno's, as
			 * Compound's is once dwnd is 0, until a loss ends the
			 * episode.
			 */
			ctcp_ep_yield(r);
		} else {
			u64 tot = ((u64)r->cwnd_l << 10) + r->cwnd_l_frac;

			tot = tot > (u64)p->plus_dec_q10 + (2 << 10) ? tot - p->plus_dec_q10 :
								       2 << 10;
			r->cwnd_l = (u32)(tot >> 10);
			r->cwnd_l_frac = (u32)(tot & 1023);
			if (r->ep < CTCP_EP_YIELD - 1)
				r->ep++;
			r->rule |= CCL_CTCP_DEC3;
		}
	} else if (ctcp_ep_cutting(r->ep) && diff < (u64)(p->gamma_exit ? p->gamma_exit : r->gamma)
							     << 10) {
		/*
		 * Diff fell under gamma: the flow's own share of the queue.  If
		 * the queueing delay did not fall to half of what it was at the
		 * cut, the flow's cut shrank Diff but not the queue: another
		 * sender keeps it, and the episode yields as above.
		 */
		if (limit && p->ep_rounds && q >= r->ep_q_us / 2) {
			ctcp_ep_yield(r);
		} else {
			r->ep = 0;
			r->rule |= CCL_CTCP_EXIT;
		}
	}
}

CCL_CORE void ctcp_round_rules(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p)
{
	u32 rtt = r->rtt_us > r->base_rtt_us ? r->rtt_us : r->base_rtt_us;
	u64 q = rtt - r->base_rtt_us;
	u64 diff = rtt ? ((u64)r->win << 10) * q / rtt : 0;
	u32 dwnd_in = r->dwnd_q10;
	bool keep = p->plus && p->keep_pipe, probing, limit;
	/* an episode may start: Diff >= gamma with dwnd given back */
	bool high = diff >= ((u64)r->gamma << 10) && dwnd_in == 0;

	if (dwnd_in)
		r->dw_grew = 1;
	r->diff_q10 = ccl_sat32(diff);
	r->diff_reno_q10 = rtt ? ccl_sat32(((u64)r->cwnd_l << 10) * q / rtt) : 0;
	r->rule = 0;
	r->grow_q10 = 0;
	probing = p->plus && ctcp_probe(r, p);
	if (r->comp)
		r->rule |= CCL_CTCP_COMP;
	if (probing)
		return;
	ctcp_dwnd_rule(r, p, diff, rtt, keep);
	if (!p->plus)
		return;
	/* ep_per_loss and ep_rounds: always, or (probe_ms) while competing */
	limit = !p->probe_ms || r->comp;
	if (ctcp_competing_seen(r, p, high))
		limit = true;
	ctcp_episode(r, p, diff, q, high, limit, keep);
}

/* One round of the rules above.  In BPF a global subprogram: their branches
 * are verified once, not once per path of cong_avoid (Linux 6.1's verifier
 * gave up on cong_avoid at 1M instructions with them inline).  To the
 * verifier a global subprogram's pointers may be NULL. */
CCL_CORE_GLOBAL int ctcp_round_update(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p)
{
	if (!r || !p)
		return 0;
	ctcp_round_rules(r, p);
	return 0;
}

/* spread: one ACK's share of the round's growth, dwnd += grow acked / swnd
 * (rounded), so about swnd ACKed segments add grow.  Nothing to add (spread
 * off, or no growth this round) costs no division on the ACK path. */
CCL_CORE u32 ctcp_spread_ack(u32 dwnd_q10, u32 grow_q10, u32 acked, u32 swnd)
{
	u64 add;

	if (!grow_q10 || !swnd)
		return dwnd_q10;
	add = ((u64)grow_q10 * acked + swnd / 2) / swnd;
	return ccl_sat32((u64)dwnd_q10 + add);
}

/*
 * rand_keep (default on): the window a loss may not cut below.  The loss is
 * taken as random when the last round's queueing delay q = RTT - baseRTT
 * was under a quarter of the largest seen, qmax = RTTmax - baseRTT, and
 * qmax shows a buffer of at least a quarter of the base RTT:
 *   random  <=>  4 q < qmax  and  4 qmax >= baseRTT
 * (the rule CCPD uses, with the round RTT for the smoothed
 * one).  A random loss keeps the pipe, swnd baseRTT/RTT: what the flow had
 * queued goes, the pipe stays.  A buffer below baseRTT/4 never qualifies:
 * there RTT noise is as large as the queue and a loss is the buffer's.
 * Returns 0 (no floor) otherwise.
 */
CCL_CORE u32 ctcp_loss_floor(u32 swnd, u32 rtt_us, u32 rtt_max_us, u32 base_rtt_us,
			     const struct ccl_ctcp_plus_params *p)
{
	u64 q, qmax;

	if (!p->rand_keep || !base_rtt_us || base_rtt_us == CCL_U32_MAX || rtt_us < base_rtt_us ||
	    rtt_max_us < rtt_us)
		return 0;
	q = rtt_us - base_rtt_us;
	qmax = rtt_max_us - base_rtt_us;
	if (4 * qmax < base_rtt_us || 4 * q >= qmax)
		return 0;
	return (u32)((u64)swnd * base_rtt_us / rtt_us);
}

/* Segments outstanding at a round's start: (snd_nxt - snd_una) then. */
CCL_CORE u32 ctcp_round_sent(u32 beg_snd_una, u32 beg_snd_nxt, u32 mss)
{
	return (beg_snd_nxt - beg_snd_una) / (mss ? mss : 1);
}

/*
 * RTTmax for rand_keep, once per round with the round's window and RTT.  A
 * queue forms only while the flow delivers at the bottleneck's rate, so a
 * round's RTT counts as evidence of the buffer only when its rate win/RTT
 * is at least 3/4 of the best the flow has had:
 *   rate = win / RTT;  rate_max = max(rate_max, rate)
 *   RTTmax = max(RTTmax, RTT)   if 4 rate >= 3 rate_max
 * A stall of the path lifts the RTT without the rate: one round of a 10-ms
 * stall on a 10-ms path doubles the round's RTT at half the rate, and
 * without the filter would set RTTmax for good, and every later loss would
 * keep the pipe.
 * rate_max in segments per second.  win is the data outstanding at the
 * round's start (ctcp_round_sent), what the round's ACKs acknowledge, so
 * win/RTT cannot exceed the link.  The window at the round's end does: in
 * slow start it is twice the one the RTT measured, a rate above the link's,
 * and the overshoot round would then fail the 3/4 filter, leaving RTTmax
 * at a round before the queue.
 */
CCL_CORE void ctcp_rtt_max_update(u32 *rtt_max_us, u32 *rate_max, u32 win, u32 rtt_us)
{
	u64 rate;

	if (!rtt_us || rtt_us == CCL_U32_MAX)
		return;
	rate = (u64)win * 1000000 / rtt_us;
	if (rate > *rate_max)
		*rate_max = ccl_sat32(rate);
	if (4 * rate >= 3 * (u64)*rate_max && rtt_us > *rtt_max_us)
		*rtt_max_us = rtt_us;
}

/*
 * The kernel set the send window itself (PRR's end, an RTO, an undo, an
 * idle restart, Recovery entered again before cong_avoid ran): split the
 * kernel's window `cwnd` into the loss and delay windows again, so that
 *   cwnd_l + dwnd = cwnd
 * A lower window takes the delay window first, then the loss window; a
 * higher one (an undo) goes to the loss window.  Both cong_avoid and
 * ssthresh call it: ssthresh on a stale split would halve a loss window
 * the kernel no longer has (one left by a skipped hook can be billions of
 * segments; docs/known-issues.md), and the kernel sets the window to that
 * ssthresh at the end of Recovery.
 */
CCL_CORE void ctcp_resync(u32 cwnd, u32 *cwnd_l, u32 *dwnd_q10)
{
	u32 d = *dwnd_q10 >> 10;

	if (*cwnd_l >= cwnd) {
		*cwnd_l = cwnd;
		*dwnd_q10 = 0;
	} else if ((u64)*cwnd_l + d > cwnd) {
		*dwnd_q10 = (cwnd - *cwnd_l) << 10; /* < d <= 2^22: fits */
	} else {
		*cwnd_l = cwnd - d;
	}
}

/*
 * The send window a loss is judged with.  A loss during a probe (probe_ms)
 * is the overflow of the queue the window from before the probe built: the
 * probe cut to the pipe, and halving that as well would cut the flow to a
 * quarter of its window.  As ccpd judges a loss in a drain.
 * Returns the window to halve; the caller re-splits it as loss window.
 */
CCL_CORE u32 ctcp_loss_window(u32 swnd, bool probing, u32 probe_w)
{
	return probing && probe_w > swnd ? probe_w : swnd;
}

/* On a dupack loss: cwnd_l = cwnd_l / 2 and
 *   dwnd = max(max(swnd (1 - beta), min(floor, swnd)) - cwnd_l / 2, 0)
 * so the total becomes swnd (1 - beta), or the floor (ctcp_loss_floor)
 * when that is higher.  Returns the new ssthresh. */
CCL_CORE u32 ctcp_loss(u32 swnd, u32 beta_q10, u32 floor, u32 *cwnd_l, u32 *dwnd_q10)
{
	/* A loss window above the send window is stale (the caller re-splits
	 * first, ctcp_resync): halving it gave an ssthresh above swnd. */
	u32 cl = *cwnd_l < swnd ? *cwnd_l : swnd;
	u32 half = cl / 2 > 1 ? cl / 2 : 1;
	u64 d = (u64)swnd * (1024 - beta_q10) >> 10;

	d = ccl_max64(d, ccl_min64(floor, swnd));
	d = d > half ? d - half : 0;
	*cwnd_l = half;
	*dwnd_q10 = ccl_sat32(d << 10);
	return half + d > 2 ? (u32)(half + d) : 2;
}

/*
 * TUBE, at a congestive loss (Tan et al.: gamma from the backlog the Reno
 * window had, Diff_reno = cwnd_l (RTT - baseRTT) / RTT):
 *   gamma += (3/4 Diff_reno - gamma) / 2,   clipped to [5, 30]
 * Returns the new gamma.  `gamma` is the path's (gamma_tune 2) or the
 * flow's own (1).  A flow's own Diff_reno is its share of the queue, so a
 * gamma of its own is proportional to its window, and the early cut,
 * Diff >= gamma, then fires at the same queue for every flow whatever its
 * share: the split of the last loss stays (window/gamma is the same for
 * every flow).
 * One gamma for the flows of a path makes the larger flow cut first, as
 * Vegas's alpha does.
 */
CCL_CORE u32 ctcp_tube(u32 gamma, s32 diff_reno_q10)
{
	s32 target = (diff_reno_q10 * 3) >> 12;
	s32 g = (s32)gamma + (s32)ccl_sdiv(target - (s32)gamma, 2);

	return g < 5 ? 5 : (g > 30 ? 30 : (u32)g);
}

/* ---------------------------------------------------------------------------
 * The state machine (docs/ctcp_plus.md): per-flow state and one function
 * per hook.  The hook file copies the kernel's fields in, applies what comes
 * out, and keeps the per-path gamma map (gamma_tune 2) and telemetry.  The
 * states and their transitions: the header of bpf/ctcp_plus.bpf.c.
 * ------------------------------------------------------------------------- */

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

/* A new round: its samples start from nothing (base_rtt is kept). */
CCL_CORE void ctcp_rearm(struct ctcp_plus *ca, u32 snd_una, u32 snd_nxt)
{
	ca->beg_snd_una = snd_una;
	ca->beg_snd_nxt = snd_nxt;
	ccl_round_reset(&ca->round, snd_nxt);
	ca->cnt_rtt = 0;
	ca->round_sum_us = 0;
	ca->round_min_us = CCL_U32_MAX;
}

CCL_CORE void ctcp_on_init(struct ctcp_plus *ca, u32 snd_cwnd, u32 gamma, u32 snd_una, u32 snd_nxt)
{
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->cwnd_l = snd_cwnd;
	ca->last_cwnd = snd_cwnd;
	ca->base_rtt_us = CCL_U32_MAX;
	ca->gamma = gamma;
	ca->diff_reno_q10 = -1;
	ca->flags = CTCP_F_ENABLED;
	ctcp_rearm(ca, snd_una, snd_nxt);
}

/* pkts_acked(): the round's samples, in Open only. */
CCL_CORE void ctcp_on_rtt(struct ctcp_plus *ca, s32 rtt_us)
{
	u32 v;

	if (!(ca->flags & CTCP_F_ENABLED) || rtt_us <= 0)
		return;
	v = (u32)rtt_us + 1;
	if (v < ca->base_rtt_us)
		ca->base_rtt_us = v;
	if (v < ca->round_min_us)
		ca->round_min_us = v;
	ca->round_sum_us += v;
	ca->cnt_rtt++;
}

/*
 * cong_avoid(), per ACK: the loss window grows by slow start, else by
 * 1/swnd per segment, and dwnd by this round's spread growth; neither
 * grows in an episode or a probe (rule 4).  snd_cwnd first re-syncs the
 * split when the kernel changed the window (PRR end, RTO, undo, restart).
 */
CCL_CORE void ctcp_on_ack(struct ctcp_plus *ca, const struct ccl_ctcp_plus_params *p, u32 snd_cwnd,
			  u32 snd_ssthresh, u32 acked, bool cwnd_limited)
{
	u32 swnd = snd_cwnd ? snd_cwnd : 1;

	if (snd_cwnd != ca->last_cwnd)
		ctcp_resync(snd_cwnd, &ca->cwnd_l, &ca->dwnd_q10);
	if (!cwnd_limited)
		return;
	if (snd_cwnd < snd_ssthresh) {
		ca->cwnd_l += acked;
		ca->dwnd_q10 = 0;
	} else if (!(p->plus && (ctcp_ep_cutting(ca->ep) || (ca->flags & CTCP_F_PROBE)))) {
		ca->cwnd_cnt += acked;
		if (ca->cwnd_cnt >= swnd) {
			ca->cwnd_l += ca->cwnd_cnt / swnd;
			ca->cwnd_cnt %= swnd;
		}
		ca->dwnd_q10 = ctcp_spread_ack(ca->dwnd_q10, ca->grow_q10, acked, swnd);
	}
}

/* A probe ended with no verdict (a round of fewer than min_samples
 * samples): the loss window goes back to the send window the probe
 * started from, when that is larger (a loss in the probe already ended it
 * and halved that window, ctcp_loss_window). */
CCL_CORE void ctcp_probe_unjudged(struct ctcp_plus *ca)
{
	u64 now = (u64)ca->cwnd_l + (ca->dwnd_q10 >> 10);

	if (ca->ep_cwnd_l > now) {
		ca->cwnd_l = ca->ep_cwnd_l;
		ca->cwnd_l_frac = 0;
		ca->dwnd_q10 = 0;
	}
}

/* The round's RTT: its mean (rtt_mode 1) or its minimum sample. */
CCL_CORE u32 ctcp_round_rtt(const struct ctcp_plus *ca, const struct ccl_ctcp_plus_params *p)
{
	return p->rtt_mode && ca->cnt_rtt ? ca->round_sum_us / ca->cnt_rtt : ca->round_min_us;
}

/* What the end of a round needs of the kernel's state. */
struct ctcp_round_in {
	u32 snd_cwnd;
	u32 snd_ssthresh;
	u32 mss;
	u32 now_ms; /* tcp_mstamp / 1000 */
};

/*
 * The end of a round: rand_keep's evidence, then the delay window and the
 * CTCP+ rules (ctcp_round_update) from the round's samples:
 *   Diff = win (RTT - baseRTT) / RTT
 *   dwnd += max(alpha swnd^(3/4) - 1, 0) if Diff < gamma, else -= zeta Diff
 * Fills r (telemetry reads it: r->rtt_us is the round's RTT, CCL_U32_MAX
 * without a sample; r->rule = 0 when the rules did not run) and
 * returns the ssthresh to write, 0 = none: the early cut, the decrease and
 * a probe set it to the new loss window, so that cong_avoid does not
 * slow-start the cut back (ssthresh still held slow start's loss).  The
 * caller has set ca->gamma to the path's (gamma_tune 2) and re-arms the
 * round afterwards.
 */
CCL_CORE u32 ctcp_on_round(struct ctcp_plus *ca, const struct ccl_ctcp_plus_params *p,
			   const struct ctcp_round_in *in, struct ctcp_round *r)
{
	u32 swnd = in->snd_cwnd ? in->snd_cwnd : 1;
	u32 rtt = ctcp_round_rtt(ca, p);
	/* the data this round's ACKs acknowledged, in segments */
	u32 sent = ctcp_round_sent(ca->beg_snd_una, ca->beg_snd_nxt, in->mss);

	__builtin_memset(r, 0, sizeof(*r));
	r->rtt_us = rtt;
	if (ca->cnt_rtt >= p->min_samples && rtt != CCL_U32_MAX) {
		ca->last_rtt_us = rtt;
		ctcp_rtt_max_update(&ca->rtt_max_us, &ca->rate_max, sent, rtt);
	}
	ca->grow_q10 = 0;
	if (!(ca->flags & CTCP_F_ENABLED) || in->snd_cwnd < in->snd_ssthresh ||
	    ca->cwnd_l < p->low_wnd || ca->base_rtt_us == CCL_U32_MAX)
		return 0;
	if (ca->cnt_rtt < p->min_samples) {
		/* A round the rules cannot judge ends a probe (with no verdict)
		 * and a cutting episode: rule (4) holds the loss window only
		 * while the rules see the queue.  A probe that began at 2
		 * segments never saw 3 samples in a round again (one delayed
		 * ACK a round), and held the window at 2 for 7 s.
		 * A probe with no verdict gives back the window it held down
		 * (its probe_w, ep_cwnd_l): it only measures.  Keeping its
		 * cut made every probe of a flow with few ACKs a round a
		 * halving that nothing undid (UMTS, 80 ms: 13 -> 2 segments
		 * in three probes, then 2 for 15 s of a 34-segment pipe). */
		if (ca->flags & CTCP_F_PROBE)
			ctcp_probe_unjudged(ca);
		ca->flags &= ~CTCP_F_PROBE;
		if (ctcp_ep_cutting(ca->ep))
			ca->ep = 0;
		return 0;
	}
	r->win = p->win_mode ? sent : swnd;
	r->base_rtt_us = ca->base_rtt_us;
	r->gamma = ca->gamma;
	r->swnd = swnd;
	r->w_loss = ca->w_loss;
	r->cwnd_l = ca->cwnd_l;
	r->cwnd_l_frac = ca->cwnd_l_frac;
	r->dwnd_q10 = ca->dwnd_q10;
	r->ep = ca->ep;
	r->ep_cwnd_l = ca->ep_cwnd_l;
	r->ep_q_us = ca->ep_q_us;
	r->eps = ca->eps;
	r->dw_grew = !!(ca->flags & CTCP_F_GREW);
	/* probe_ms: a probe keeps its floor and window in the episode's fields
	 * (no episode starts during a probe) */
	r->rtt_max_us = ca->rtt_max_us;
	r->round_min_us = ca->round_min_us;
	r->now_ms = in->now_ms;
	r->slot = (ca->flags & CTCP_F_SLOT) ? ca->slot : CTCP_SLOT_NONE;
	r->probe = (ca->flags & CTCP_F_PROBE) >> CTCP_F_PROBE_SHIFT;
	r->probe_min_us = ca->ep_q_us;
	r->probe_w = ca->ep_cwnd_l;
	r->comp = !!(ca->flags & CTCP_F_COMP);
	r->ref_cl = ca->ref_cl;
	r->probes_since_loss = (ca->flags & CTCP_F_SINCE) >> CTCP_F_SINCE_SHIFT;
	ctcp_round_update(r, p);
	ca->ref_cl = r->ref_cl;
	ca->eps = r->eps > 255 ? 255 : (u8)r->eps;
	ca->flags &= CTCP_F_ENABLED;
	if (r->dw_grew)
		ca->flags |= CTCP_F_GREW;
	if (r->comp)
		ca->flags |= CTCP_F_COMP;
	if (r->slot != CTCP_SLOT_NONE) {
		ca->flags |= CTCP_F_SLOT;
		ca->slot = (u8)r->slot;
	}
	ca->flags |= (u8)((r->probe & 3) << CTCP_F_PROBE_SHIFT);
	ca->flags |= (u8)((r->probes_since_loss & 3) << CTCP_F_SINCE_SHIFT);
	if (r->probe) {
		ca->ep_cwnd_l = r->probe_w;
		ca->ep_q_us = r->probe_min_us;
	} else {
		ca->ep_cwnd_l = r->ep_cwnd_l;
		ca->ep_q_us = r->ep_q_us;
	}
	ca->cwnd_l = r->cwnd_l;
	ca->cwnd_l_frac = r->cwnd_l_frac;
	ca->dwnd_q10 = r->dwnd_q10;
	ca->ep = r->ep;
	ca->grow_q10 = r->grow_q10;
	ca->diff_reno_q10 = (s32)r->diff_reno_q10;
	if (r->rule & CCL_CTCP_CUT2)
		ca->n_cut2++;
	if (r->rule & CCL_CTCP_DEC3)
		ca->n_dec3++;
	if ((r->rule & (CCL_CTCP_CUT2 | CCL_CTCP_DEC3)) || r->probe)
		return ca->cwnd_l > 2 ? ca->cwnd_l : 2;
	return 0;
}

/* The kernel's window: swnd = cwnd + dwnd, at least 2, within the clamp. */
CCL_CORE u32 ctcp_window(struct ctcp_plus *ca, u32 cwnd_clamp)
{
	u32 cw = ca->cwnd_l + (ca->dwnd_q10 >> 10);

	if (cw < 2)
		cw = 2;
	cw = cw < cwnd_clamp ? cw : cwnd_clamp;
	ca->last_cwnd = cw;
	return cw;
}

/* What a loss (dupack or RTO) ends: an episode, the count of episodes and
 * dwnd's growth since the last loss, a probe and the probes since a loss. */
CCL_CORE void ctcp_loss_reset(struct ctcp_plus *ca)
{
	ca->ep = 0;
	ca->eps = 0;
	ca->grow_q10 = 0;
	ca->flags &= ~(CTCP_F_GREW | CTCP_F_PROBE | CTCP_F_SINCE);
}

/* ctcp_on_loss()'s report, bits. */
enum ctcp_loss_ev {
	CTCP_LOSS_RANDOM = 1, /* rand_keep judged the loss random */
	CTCP_LOSS_TUNED = 2,  /* TUBE moved gamma (gamma_tune 2: write it to the path) */
};

/*
 * ssthresh(): cwnd /= 2, dwnd = max(swnd (1 - beta) - cwnd/2, 0), or with
 * rand_keep a random loss keeps the pipe (ctcp_loss_floor).  A congestive
 * loss tunes gamma (TUBE) from the round's Diff_reno, starting from
 * `gamma` (the path's with gamma_tune 2, else the flow's own), and records
 * the window where the buffer overflowed (w_loss).  A random loss shows
 * neither the buffer (TUBE would learn a gamma from whatever the flow had
 * queued) nor that window: both keep what the last congestive loss taught.
 * Returns the kernel's ssthresh; *ev gets enum ctcp_loss_ev bits.
 */
CCL_CORE u32 ctcp_on_loss(struct ctcp_plus *ca, const struct ccl_ctcp_plus_params *p, u32 snd_cwnd,
			  u32 gamma, u32 *ev)
{
	u32 floor, w, ssth;

	*ev = 0;
	ca->losses++;
	/* The kernel's window may be newer than the split (Recovery entered
	 * again on the ACK that ended it, before cong_avoid): halve that one. */
	if (snd_cwnd != ca->last_cwnd) {
		ctcp_resync(snd_cwnd, &ca->cwnd_l, &ca->dwnd_q10);
		ca->last_cwnd = snd_cwnd;
	}
	/* in a probe, the window from before it (its probe_w is ep_cwnd_l) */
	w = ctcp_loss_window(snd_cwnd, ca->flags & CTCP_F_PROBE, ca->ep_cwnd_l);
	if (w != snd_cwnd) {
		ca->cwnd_l = w;
		ca->dwnd_q10 = 0;
	}
	floor = ctcp_loss_floor(w, ca->last_rtt_us, ca->rtt_max_us, ca->base_rtt_us, p);
	if (floor) {
		*ev |= CTCP_LOSS_RANDOM;
		ca->diff_reno_q10 = -1;
	} else {
		/* TUBE: gamma += (0.75 diff_reno - gamma) / 2, clipped to [5, 30]. */
		if (p->gamma_tune && ca->diff_reno_q10 >= 0) {
			ca->gamma = ctcp_tube(gamma, ca->diff_reno_q10);
			ca->diff_reno_q10 = -1;
			*ev |= CTCP_LOSS_TUNED;
		}
		ca->w_loss = w;
	}
	ssth = ctcp_loss(w, p->beta_q10, floor, &ca->cwnd_l, &ca->dwnd_q10);
	ctcp_loss_reset(ca);
	ca->ref_cl = 0;
	ca->cwnd_cnt = 0;
	return ssth;
}

/* RTO (CA_EVENT_LOSS): dwnd = 0; cwnd_l re-syncs in cong_avoid. */
CCL_CORE void ctcp_on_rto(struct ctcp_plus *ca)
{
	ca->dwnd_q10 = 0;
	ctcp_loss_reset(ca);
}

/* set_state(): the delay component runs in Open only; entering Open
 * starts a fresh round. */
CCL_CORE void ctcp_on_state(struct ctcp_plus *ca, bool open, u32 snd_una, u32 snd_nxt)
{
	if (open && !(ca->flags & CTCP_F_ENABLED))
		ctcp_rearm(ca, snd_una, snd_nxt);
	if (open)
		ca->flags |= CTCP_F_ENABLED;
	else
		ca->flags &= ~CTCP_F_ENABLED;
}

#endif /* __CTCP_CORE_H */
