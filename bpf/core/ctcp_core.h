/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ctcp_core.h - Compound TCP / CTCP+ arithmetic core: the per-round update
 * and ssthresh (docs/ctcp_plus.md).  Pure integer functions shared by
 * bpf/ctcp_plus.bpf.c and the host unit tests.  Windows in segments, delay
 * window and Diff in segments x 1024 (Q10), RTTs in us.
 */
#ifndef __CTCP_CORE_H
#define __CTCP_CORE_H

#include "ccl_core.h"

/* w^(3/4) = sqrt(w * sqrt(w)) with two integer square roots, x 1024.
 * Valid for w <= 2^20 segments (intermediates <= 2^50); error < 0.1 %.
 * In BPF a global subprogram: the verifier checks its 64 square-root steps
 * once, not once per path of cong_avoid (which went past its 1M-instruction
 * limit when one more branch was added there). */
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
 * With ep_per_loss > 0 (default 1; with probe_ms only while competing,
 * ctcp_probe) only that many episodes start between two losses, and only
 * once the delay window has grown since the loss and the brake has taken
 * it back to 0; otherwise the loss window grows as Reno's and only the
 * delay window brakes (Compound's law).  The seed's
 * episode anticipates a loss; against a loss-based flow the loss does not
 * come, cubic's growth refills the queue, and every later episode cut the
 * loss window again by the flow's own queue while Reno's growth gave back
 * one segment a round: 173 segments fell to 77 over 8 s without a loss
 * (100 Mbit/s, 40 ms, 1 BDP, against one cubic), 0.09-0.25 of the link
 * where reno keeps 0.36-0.56.  Right after a loss dwnd is 0 because the
 * loss emptied it, not the brake, and cubic's queue is still there: the
 * episode cut the halved window to a third of the one that lost.
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
 * for shallow buffers) gives back twice the queue.  Above BDP/8 both went
 * below the pipe: at 20 Mbit/s, 80 ms, BDP/2 the brake took swnd from 166 to
 * 113 on a 133-packet pipe and the cut, in the same round, to 95; 0.93x reno.
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
 * time, not rounds: a zone crossed at Reno's segment a round took 0.1 s at
 * 10 ms but 4 s at 190 ms, where losses are random.
 */
/* ep: the episode met a queue it did not make (ep_rounds) */
#define CTCP_EP_YIELD 255
#define CTCP_SLOT_NONE 0xffffffffU
#define CTCP_PROBE_ROUNDS 3    /* rounds held after the cut; the last two read the queue */
#define CTCP_COMP_ENTER_US 500 /* a probe's queue above max(qmax/8, this): competing */
#define CTCP_COMP_EXIT_US 250  /* ... at most max(qmax/16, this): not competing */
#define CTCP_LEAVE_PROBES 2    /* ... from the third probe after a loss on */

/*
 * probe_ms (default 2000): which law the episodes follow.  Among ctcp_plus
 * flows the seed's episodes share well (each flow cuts on its own Diff, so
 * two flows of 20 and 80 ms carried 0.5 each and eight flows Jain 0.96)
 * but against a loss-based flow they starve (0.09 of the link against
 * cubic, where reno keeps 0.33-0.55); ep_per_loss and ep_rounds hold what
 * reno holds against cubic, but among ctcp_plus flows they are Reno's AIMD
 * (eight flows Jain 0.89, the 80-ms flow 0.20).  So every probe_ms of the
 * host clock each flow, at its first round in the new slot, holds its pipe
 * swnd baseRTT/RTT (no growth) for CTCP_PROBE_ROUNDS more rounds, ending
 * any episode: every ctcp_plus flow on the host drains its own queue in
 * the same round or two, and the smallest round RTT of the probe shows
 * what stays.  A queue above max(qmax/8, 0.5 ms) is another sender's: the
 * flow competes (ep_per_loss and ep_rounds apply) and gets its window from
 * before the probe back; one at most max(qmax/16, 0.25 ms) ends competing
 * (the seed's episodes), from the third probe after a loss on: a loss that
 * both flows took empties the queue for a few seconds, and a probe then
 * read reno's or cubic's queue as gone (against one reno, the seed's
 * episodes then cut the flow for 2-4 s of every 12-s cycle while reno
 * grew: 0.37-0.40 of the link).  qmax = RTTmax - baseRTT, rand_keep's largest
 * queue.  As ccpd's drains (docs/ccpd.md, "Sharing a bottleneck").  At
 * qmax/4 and 5 s, cubic's queue stayed under the bound through the first
 * 14 s of a run while the seed's episodes cut the flow from 382 to 52
 * segments.
 * Returns true while probing (the round's law is skipped).
 */
CCL_CORE bool ctcp_probe(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p)
{
	u32 slot, qmax, q, enter, leave, grown = 0;

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
		 * competitor kept growing (without them, against one reno the flow
		 * grew 23 segments in every 27 rounds to reno's 27).  A queue that
		 * drained was other ctcp_plus flows' (or a loss's): no growth, or
		 * a flow wrongly competing outgrew them (eight flows, Jain 0.92
		 * and 0.93).  Otherwise the law regrows from the pipe into the
		 * emptied queue. */
		if (r->comp && r->probe_w + grown > r->cwnd_l + (r->dwnd_q10 >> 10)) {
			r->cwnd_l = r->probe_w + grown;
			r->cwnd_l_frac = 0;
			r->dwnd_q10 = 0;
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
	/* A new slot: hold the pipe, swnd baseRTT/RTT, for the probe.  It ends
	 * an episode (and a yield): a flow that skipped the probe kept its
	 * queue through the others' probe, and they read it as another
	 * sender's (two ctcp_plus flows then competed, Jain 0.83). */
	r->slot = slot;
	r->ep = 0;
	r->probe = CTCP_PROBE_ROUNDS;
	r->probe_min_us = CCL_U32_MAX;
	r->probe_w = r->swnd;
	{
		u32 rtt = r->rtt_us > r->base_rtt_us ? r->rtt_us : r->base_rtt_us;
		u64 pipe = rtt ? (u64)r->swnd * r->base_rtt_us / rtt : r->swnd;

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

CCL_CORE void ctcp_round_update(struct ctcp_round *r, const struct ccl_ctcp_plus_params *p)
{
	u32 rtt = r->rtt_us > r->base_rtt_us ? r->rtt_us : r->base_rtt_us;
	u64 q = rtt - r->base_rtt_us;
	u64 diff = rtt ? ((u64)r->win << 10) * q / rtt : 0;
	u64 gamma_q10 = (u64)r->gamma << 10;
	u32 dwnd_in = r->dwnd_q10;
	bool keep = p->plus && p->keep_pipe, probing, limit;
	/* an episode may start: Diff >= gamma with dwnd given back */
	bool high = diff >= gamma_q10 && dwnd_in == 0;

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
	/* ep_per_loss and ep_rounds: always, or (probe_ms) while competing */
	limit = !p->probe_ms || r->comp;
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
	if (!p->plus)
		return;
	/*
	 * probe_ms, not competing: an episode whose loss window is below 7/8
	 * of the one the first episode since the loss (or since competing
	 * ended) started from means another sender takes the room each cut
	 * leaves: compete now, not at the next probe.  A sender that grows
	 * into the link without yet keeping a queue passes the probes (0-5 ms
	 * of a 40-ms buffer in the first 13 s against cubic) while the seed's
	 * episodes take the loss window from 272 to 165 segments without a
	 * loss; among ctcp_plus flows it swings by 15 % around a level.  A
	 * wrong call lasts until the next probe.
	 */
	if (p->probe_ms && !r->comp && high && !r->ep) {
		if (!r->ref_cl) {
			r->ref_cl = r->cwnd_l;
		} else if ((u64)r->cwnd_l * 8 < (u64)r->ref_cl * 7) {
			r->comp = 1;
			r->ref_cl = 0;
			r->rule |= CCL_CTCP_COMP;
			limit = true;
		}
	}
	if (high && r->ep != CTCP_EP_YIELD &&
	    (r->ep || !limit || !p->ep_per_loss || (r->dw_grew && r->eps < p->ep_per_loss))) {
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
			 * hand it the link, -1/2 a round against its growth (0.12
			 * of the link against cubic, where Reno keeps 0.36), so
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
 * stall on a 10-ms path with a 10-packet buffer (mean RTT 20.8 ms, rate
 * half the link's) set RTTmax for good, and every later loss kept the pipe.
 * rate_max in segments per second.  win is the data outstanding at the
 * round's start (ctcp_round_sent), what the round's ACKs acknowledge, so
 * win/RTT cannot exceed the link.  The window at the round's end does: in
 * slow start it is twice the one the RTT measured (640 / 232.7 ms = 2,750
 * segments/s on a 1,667 link, 20 Mbit/s, 190 ms), the overshoot round then
 * failed the 3/4 filter, and RTTmax kept a round before the queue.
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
 * ssthresh call it: ssthresh on a stale split halved a loss window of
 * 1,896,535,746 segments while the kernel's window was 11 (a run on the
 * 2-packet buffer, docs/notebook/results-history.md 3r), and the kernel then set the window
 * to that ssthresh at the end of Recovery.
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
 * probe cut to the pipe, and halving that as well cut the flow to a quarter
 * of its window (against one cubic, 200 -> 51, 171 -> 48 and 134 -> 40
 * segments in one run, its share 0.22).  As ccpd judges a loss in a drain.
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
 * share: the split of the last loss stays (eight flows on BDP/2, windows
 * 35-80 segments with gammas 11-21, window/gamma 3.7-3.8 for every one).
 * One gamma for the flows of a path makes the larger flow cut first, as
 * Vegas's alpha does.
 */
CCL_CORE u32 ctcp_tube(u32 gamma, s32 diff_reno_q10)
{
	s32 target = (diff_reno_q10 * 3) >> 12;
	s32 g = (s32)gamma + (s32)ccl_sdiv(target - (s32)gamma, 2);

	return g < 5 ? 5 : (g > 30 ? 30 : (u32)g);
}

#endif /* __CTCP_CORE_H */
