/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccpd_core.h - CCPD arithmetic core and hook logic (docs/ccpd.md).
 *
 * Pure functions on integers, shared by bpf/ccpd.bpf.c and the host unit tests
 * (bpf/core-tests/src/core_tests.rs), which compare them with an f64 model of the
 * paper's Eq. 3-6.  Units: windows and buffer quantities in segments x 1024
 * (Q10), rates in segments/s, times in us (RTT) or ms (Kd).
 */
#ifndef __CCPD_CORE_H
#define __CCPD_CORE_H

#include "ccl_core.h"

/* The capacity-derived estimates, all segments x 1024. */
struct ccpd_est {
	u32 p_q10; /* pipe: C * rtt_min                       */
	u32 b_q10; /* buffer: max(C * (rtt_max - rtt_min), b_min) */
	u32 x_q10; /* buffer level: C * max(0, rtts - rtt_min)   */
};

/* Inputs and outputs of one step of the window law. */
struct ccpd_law {
	/* in */
	u32 w_q10;	     /* current CCPD window, segments x 1024 */
	u32 rtt_min_us;	     /* m */
	u32 rtts_us;	     /* s, own smoothed RTT */
	u32 in_flight;	     /* segments (L0's F_k) */
	u32 kp_q10;	     /* Kp x 1024 */
	u32 g_q10;	     /* Kd/dt x 1024, already clamped to g_max */
	u32 gamma_q10;	     /* L1 smoothing gain x 1024 */
	u32 share_gamma_q10; /* share: the unscaled gain (0 = not sharing) */
	u32 probe_b_q10;     /* L1: B under this, x <= B/8, E > 0: w' >= 9/8 w */
	u32 cwnd_min;	     /* segments */
	u32 cwnd_max;	     /* segments */
	u32 cwnd_clamp;	     /* snd_cwnd_clamp, segments: bounds probe_up too */
	u32 e_valid;	     /* e_prev_q10 holds the previous round's error */
	s32 e_prev_q10;	     /* previous error, segments x 1024 */
	s32 dterm_in_q10;    /* L0: derivative term in force between round starts */
	struct ccpd_est est;
	/* out */
	u32 d_q10;     /* L1: own queued segments w(s-m)/s; L0: F = in flight */
	s32 e_q10;     /* E = B - x - d */
	s32 dterm_q10; /* D */
	s32 delta_q10; /* L1: Kp*E - d + D */
	u32 w_out_q10; /* new window, segments x 1024 */
};

/*
 * Eq. 4-6 with C from the capacity estimate:
 *   P = C * rtt_min,  B = C * (rtt_max - rtt_min) (>= b_min),
 *   x = C * (rtts - rtt_min)
 */
CCL_CORE void ccpd_estimate(u32 c_sps, u32 rtt_min_us, u32 rtt_max_us, u32 rtts_us, u32 b_min,
			    struct ccpd_est *e)
{
	u32 qmax = rtt_max_us > rtt_min_us ? rtt_max_us - rtt_min_us : 0;
	u32 qnow = rtts_us > rtt_min_us ? rtts_us - rtt_min_us : 0;

	e->p_q10 = ccl_sat32(ccl_segs_q10(c_sps, rtt_min_us));
	e->b_q10 = ccl_sat32(ccl_max64(ccl_segs_q10(c_sps, qmax), (u64)b_min << 10));
	e->x_q10 = ccl_sat32(ccl_segs_q10(c_sps, qnow));
}

/*
 * gamma = 1 / (1 + 2 Kp).  The RTT read at a round start measures the window
 * of the round before, and with that one-round delay the linearised loop is
 * stable for gamma (1 + 2 Kp) below about 1.05..1.35 (buffers 0.25..2 BDP),
 * not 2: 1.5/(1+2Kp) swings the queue between empty and full (docs/ccpd.md).
 */
CCL_CORE u32 ccpd_gamma_auto_q10(u32 kp_q10)
{
	return (u32)(1024ULL * 1024 / (1024 + 2 * (u64)kp_q10));
}

/*
 * share: the L1 gain scaled by the flow's part of the link, f gamma with
 *   f = r / C,  r = w / s the flow's own rate,  f within [1/32, 1].
 * Every flow reads the whole queue x, so with N flows the queue's loop gain
 * is gamma (N Kp + Kp + 1), not gamma (1 + 2 Kp) = 1: 1.4 for two flows, 3.8
 * for eight, and the queue swung between empty and full.  Scaled by its part
 * of the link, r / C = d / x, each flow moves the queue by its own part, and
 * the sum is at most gamma (1 + 2 Kp) = 1 for every N.  The equilibrium (the
 * same own queue for every flow, ccpd_law_l1) does not depend on f, so the
 * flows still converge to equal rates.  A small flow (a late joiner) grows
 * in proportion to its window, and by at least a segment a round while
 * f < 1/4 (ccpd_law_l1).  A flow alone has r = C, f = 1.
 * A global subprogram (inlined, it takes cong_control past the verifier's
 * 1M-instruction limit); share = 0 returns gamma.
 */
CCL_CORE_GLOBAL u32 ccpd_share_gamma_q10(u32 gamma_q10, u32 share, u32 c_sps,
					 const struct ccpd_law *l)
{
	u64 f;

	if (!share || !l || !l->rtts_us || !c_sps)
		return gamma_q10;
	f = (u64)l->w_q10 * CCL_USEC_PER_SEC / l->rtts_us / c_sps;
	f = ccl_max64(ccl_min64(f, CCL_Q10), CCL_Q10 / 32);
	return (u32)((u64)gamma_q10 * f >> 10);
}

/* g = Kd / (t_k - t_{k-1}) with Kd in ms and dt the round duration, clamped. */
CCL_CORE u32 ccpd_gain_q10(u32 kd_ms, u32 dt_us, u32 g_max_q10)
{
	u64 g;

	if (!kd_ms)
		return 0;
	if (!dt_us)
		return g_max_q10;
	g = (u64)kd_ms * 1000 * 1024 / dt_us;
	return (u32)ccl_min64(g, g_max_q10);
}

/* D = g * (E_k - E_{k-1}), bounded by +-(P + B)/2 so one noisy round cannot
 * move the window by more than half the path storage. */
CCL_CORE s32 ccpd_dterm_q10(u32 g_q10, s64 e_q10, s64 e_prev_q10, const struct ccpd_est *e)
{
	s64 lim = ((s64)e->p_q10 + e->b_q10) / 2;
	s64 d = ccl_smul_q10(e_q10 - e_prev_q10, g_q10);

	return (s32)ccl_smax(ccl_smin(d, lim), -lim);
}

CCL_CORE u32 ccpd_clamp_w_q10(s64 w, u32 cwnd_min, u32 cwnd_max)
{
	s64 lo = (s64)cwnd_min << 10, hi = (s64)ccl_max64(cwnd_max, cwnd_min) << 10;

	return (u32)ccl_smax(ccl_smin(w, hi), lo);
}

/*
 * Mode L1, once per round (docs/ccpd.md, "How ccload reads it"):
 *   d      = w (s - m) / s                      own segments in the buffer
 *   E      = B - x - d
 *   D      = g (E_k - E_{k-1})
 *   target = w m / s + Kp (B - x - d) + D
 *   w'     = w + gamma (target - w) = w + gamma (Kp E - d + D)
 * With share gamma is scaled by f (ccpd_share_gamma_q10), half the queue of
 * the other flows, x - d, counts again in E, and a rise is at least one
 * segment (no more than the unscaled step):
 *   E      = B - x - d - max(x - d, 0) / 2
 *   w'     = w + f gamma (Kp E - d + D),
 *   w' - w >= min(1, gamma (Kp E - d + D))  for a rise, if f < 1/4
 * N flows alike then hold x = Kp B / (3 Kp / 2 + (1 + Kp / 2) / N): 0.4 B
 * alone, 0.5 B for two flows, 0.62 B for eight (0.84 B without the term,
 * where the queue and RTT noise overflow the buffer).  Counted whole,
 * E = B - 2x no longer depends on the flow's own queue and a small flow
 * barely grows.  The one-segment floor is Reno's growth for a flow with a
 * small part of the link, whose scaled step is a fraction of a segment.  A
 * flow alone (x = d, f = 1) is unchanged.
 * With probe_up, while the flow has lost nothing and B is under twice its
 * floor (B a guess: no loss and no queue has taught it), a round with free
 * storage and no queue of note grows the window by an eighth, past the clamp
 * P + B - margin but not past snd_cwnd_clamp (ccpd_probe_b_q10 gives probe_b):
 *   w' = max(w', min(9/8 w, cwnd_clamp))   if B < probe_b, E > 0, x <= B / 8
 * Where pairs read no more than the flow's own delivery rate fb (a cellular
 * scheduler's grants), C = fb and P = fb m is the flow's own window: with B
 * at its floor the clamp held the window a packet or two above what it
 * delivered, and it grew by about that a round on a link with room
 * (docs/ccpd.md, "Probing above the flow's own rate").  A queue of an eighth
 * of w then shows in x and teaches B, or a loss ends the guess, and the law
 * is the paper's again.  On a LAN path whose buffer is a few packets B stays
 * under 2 b_min for real: its losses end the probing there.
 * A global subprogram: the verifier checks it once.
 */
CCL_CORE_GLOBAL int ccpd_law_l1(struct ccpd_law *l)
{
	u32 m, s;
	u64 q;
	s64 e, delta, w;

	if (!l)
		return 0;
	m = l->rtt_min_us;
	s = l->rtts_us > m ? l->rtts_us : m;
	/* queueing delay capped at 10 s: w_q10 < 2^32 times < 2^24 fits u64 */
	q = ccl_min64(s - m, 10000000);
	l->d_q10 = s ? (u32)((u64)l->w_q10 * q / s) : 0;
	e = (s64)l->est.b_q10 - l->est.x_q10 - l->d_q10;
	if (l->share_gamma_q10 && l->est.x_q10 > l->d_q10)
		e -= (l->est.x_q10 - l->d_q10) / 2;
	l->dterm_q10 = l->e_valid ? ccpd_dterm_q10(l->g_q10, e, l->e_prev_q10, &l->est) : 0;
	delta = ccl_smul_q10(e, l->kp_q10) - l->d_q10 + l->dterm_q10;
	w = (s64)l->w_q10 + ccl_smul_q10(delta, l->gamma_q10);
	if (l->share_gamma_q10 && delta > 0 && (u64)l->gamma_q10 * 4 < l->share_gamma_q10)
		w = ccl_smax(w, (s64)l->w_q10 +
					ccl_smin(CCL_Q10, ccl_smul_q10(delta, l->share_gamma_q10)));

	l->e_q10 = (s32)e;
	l->delta_q10 = (s32)ccl_smax(ccl_smin(delta, 0x7fffffff), -0x7fffffff);
	l->w_out_q10 = ccpd_clamp_w_q10(w, l->cwnd_min, l->cwnd_max);
	if (l->est.b_q10 < l->probe_b_q10 && e > 0 && (u64)l->est.x_q10 * 8 <= l->est.b_q10)
		l->w_out_q10 = (u32)ccl_max64(
			l->w_out_q10,
			ccl_min64(ccl_min64((u64)l->w_q10 * 9 / 8, (u64)l->cwnd_clamp << 10),
				  CCL_U32_MAX));
	return 1;
}

/*
 * Mode L0, every ACK, the paper's Eq. 3 literally (F_k = packets in flight):
 *   w_k = Kp (B - x_k - F_k) + Kd/(t_k - t_{k-1}) ((x_{k-1} + F_{k-1}) - (x_k + F_k))
 * The derivative term is refreshed at round starts (`round_start`), with
 * E = B - x - F so that E_k - E_{k-1} = (x+F)_{k-1} - (x+F)_k, and held between.
 */
CCL_CORE void ccpd_law_l0(struct ccpd_law *l, u32 round_start)
{
	s64 e, w;

	l->d_q10 = l->in_flight << 10;
	e = (s64)l->est.b_q10 - l->est.x_q10 - l->d_q10;
	if (round_start)
		l->dterm_q10 = l->e_valid ? ccpd_dterm_q10(l->g_q10, e, l->e_prev_q10, &l->est) : 0;
	else
		l->dterm_q10 = l->dterm_in_q10;
	w = ccl_smul_q10(e, l->kp_q10) + l->dterm_q10;

	l->e_q10 = (s32)e;
	l->delta_q10 = 0;
	l->w_out_q10 = ccpd_clamp_w_q10(w, l->cwnd_min, l->cwnd_max);
}

/* ---------------------------------------------------------------------------
 * The hooks, as pure functions on the per-flow state below.  bpf/ccpd.bpf.c
 * copies kernel fields into a `struct ccpd_ack` and writes back what these
 * return; the host closed-loop model (bpf/core-tests/src/ccpd_loop_tests.rs) drives
 * the same functions in the kernel's hook order.
 * ------------------------------------------------------------------------- */

enum ccpd_pair_state { CCPD_PAIR_IDLE = 0, CCPD_PAIR_ARMED = 1, CCPD_PAIR_HALF = 2 };

/* Loss classes (docs/ccpd.md, "Loss"). */
enum ccpd_loss_class { CCPD_LOSS_NONE = 0, CCPD_LOSS_CONGESTIVE = 1, CCPD_LOSS_RANDOM = 2 };

/* Event bits returned to the caller, which counts them. */
enum ccpd_ev {
	CCPD_EV_PAIR_OK = 1,
	CCPD_EV_PAIR_REJECT = 2,
	CCPD_EV_ROUND = 4,
	CCPD_EV_PAIR_ARMED = 8,
	CCPD_EV_FALL = 16 /* ccpd_rate_fall read a capacity fall */
};

#define CCPD_FB_EPOCH_ROUNDS 10	  /* delivery-rate max window, rounds */
#define CCPD_CAP_EXPIRY_EPOCHS 4  /* a pair sample older than this expires */
#define CCPD_CAP_OVER_FB_Q10 1280 /* C <= 1.25 x max delivery rate */
#define CCPD_NOISE_M_MAX_US 1000  /* a noise floor is learned where m is under this */

/* Sharing a bottleneck (share = 1; docs/ccpd.md, "Sharing a bottleneck"). */
enum ccpd_share_bits {
	CCPD_SH_ON = 1,	      /* the state is laid out for share = 1 (unions) */
	CCPD_SH_SLOT = 2,     /* drain_slot holds a slot */
	CCPD_SH_DRAINING = 4, /* in a drain */
	CCPD_SH_COMP = 8,     /* competing with a flow that keeps the queue full */
	CCPD_SH_QLOSS = 16,   /* a congestive loss re-learnt rtt_max: tell the path */
	CCPD_SH_PATH = 32,    /* a round started: ccpd_path_sync is due */
	CCPD_SH_DLOSS = 64,   /* the loss in hand came in a drain */
	CCPD_SH_CLOSS = 128,  /* competing, a congestive loss came since it began */
};

#define CCPD_RTT_MAX_MIN_N 4	 /* rtt_max learns from samples with this many in flight ahead */
#define CCPD_DRAIN_MIN_US 200000 /* a drain lasts max(this, 2 smoothed RTTs) */
#define CCPD_DRAIN_Q10 768	 /* ... competing, at 3/4 of the pipe share */
#define CCPD_COMP_ENTER_US 500	 /* a drain's queue above max(qmax/4, this): competing */
#define CCPD_COMP_ENTER_PKTS 4	 /* ... and this many packets at max(fb, C / 4) */
#define CCPD_COMP_EXIT_US 250	 /* ... at most max(qmax/8, this): not competing, */
#define CCPD_COMP_EXIT_Q10 768	 /* ... when the path's ccpd flows carried >= 3/4 C */
#define CCPD_COMP_BETA_Q10 717	 /* competing: a congestive loss holds 0.7 W */
#define CCPD_COMP_GROW_US 10000	 /* competing: grow s / 10 ms segments per round (>= 1) */
#define CCPD_MED_SHIFT 4	 /* pair median moves 1/16 per sample */

/* Laws in force, as telemetry reports them (`mode`). */
enum ccpd_law_in_force { CCPD_LAW_L0 = 0, CCPD_LAW_L1 = 1, CCPD_LAW_DRAIN = 2, CCPD_LAW_COMP = 3 };

/*
 * Per-flow state: exactly the 104 bytes of icsk_ca_priv.
 *
 * The unions share bytes between members that are never live together.
 * Each member's name says who owns it (ccpd_on_ack's modes, the phases):
 *   law_*     the law's derivative memory: CA, valid while e_valid
 *   ss_*      slow start (phase SS)
 *   rto_*     the RTO's slow start (SS_RTO)
 *   drain_*   share, a drain (CCPD_SH_DRAINING) or its slot
 *   sh_*      share (CCPD_SH_ON)
 *   cp_*      the CapProbe filter, share off
 *   rw_*      CA, the delivery-rate window under 1 ms of m
 *   recov_*   Recovery (no pair out: pair_* are the pairs')
 * Each handover writes the incoming member first (ccpd_ss_end,
 * ccpd_drain's start and end, ccpd_on_ssthresh, ccpd_share_sync); the
 * closed-loop model checks on every ACK that the mode owns what it reads
 * (check_mode in bpf/core-tests/src/ccpd_loop_tests.rs).
 */
struct ccpd {
	u32 pair_t1_ns;		/* low 32 bits of the ns time of the ACK covering the
				 * first pair unit (a pair lasts at most 3 rounds) */
	u32 noise_us;		/* LAN: RTT noise floor n learned over m, us (ccpd_noise_round) */
	u32 cap_sps;		/* C-hat from packet pairs, segments/s (0 = none) */
	u32 fb_cur;		/* delivery-rate max, current epoch, seg/s */
	u32 fb_prev;		/* ... previous epoch, seg/s */
	u32 rtt_min_us;		/* own min of RTT samples, us */
	u32 rtt_max_us;		/* max of own smoothed RTT, us */
	u32 rtts_q3;		/* own smoothed RTT x 8 (gain 1/8), us */
	struct ccl_round round; /* round tracker (delivered-count rounds) */
	u32 round_start_us;	/* (u32) time of the last round start, us */
	u32 w_q10;		/* CCPD window, segments x 1024 */
	union {
		struct {
			union {
				s32 law_e_prev_q10; /* last error (derivative memory), segments x 1024 */
				u32 drain_s_us; /* draining (e_valid = 0): the smoothed
						     * RTT when the drain began, us */
			};
			s32 law_dterm_q10; /* derivative term in force, segments x 1024 */
		};
		struct {
			/* slow start, paced: the run of RTT samples that showed a queue */
			u32 ssq_since_us; /* (u32) time of its first sample */
			u8 ssq_n;	  /* its samples (0 = none), saturating */
			u8 ss_css;	  /* ss_exit 2: a delay exit waits for its round's end */
			u16 ssq_base;	  /* the last round's smallest sample over m, 32-us units */
		};
	};
	u32 cwnd_hold; /* window held in recovery, segments */
	union {
		u32 rto_ss_target; /* slow-start target after RTO, segments */
		u32 drain_w_saved; /* draining: the window before the drain */
	};
	union {
		u32 pair_seq;	  /* snd_nxt when the pair was armed */
		u32 recov_losses; /* in Recovery (no pair armed): losses since entry */
	};
	u32 pair_rtt1_us; /* RTT sample of the first unit's ACK, us */
	u32 round_min_us; /* smallest RTT sample of the current round, us */
	union {
		struct {
			u32 cp_best_dsum_us; /* min RTT sum this epoch, us */
			u32 cp_best_c_sps;   /* ... and its capacity sample, segments/s */
		};
		struct {
			u32 drain_min_us; /* smallest RTT sample of the drain */
			u32 drain_end_us; /* (u32) time the drain ends */
		};
	};
	union {
		u32 ss_last_ack_us; /* (u32) time of the last ACK (ACK-train check) */
		u32 rw_start_us;    /* (u32) start of the delivery-rate window, 0 = none */
	};
	u32 recov_exit_us; /* (u32) time Recovery/Loss was last left; 0 = never */
	u8 pair_round;	   /* low 8 bits of round_cnt at the last pair attempt */
	u8 sh;		   /* enum ccpd_share_bits */
	union {
		u16 ss_round_gap; /* ACK gaps over CCPD_TRAIN_GAP_US this round, 32-us units */
		u16 rw_start_dlv; /* low 16 bits of delivered at rw_start_us */
		u16 fall_round;	  /* CA, m >= 1 ms (no rate window): low 16 bits of
				   * 1 + the round that last read a fall (ccpd_rate_fall;
				   * 1 +: a state of zeros has read none) */
	};
	u8 fb_epoch_round; /* low 8 bits of round_cnt at the fb epoch start */
	union {
		u8 cp_epoch_round; /* ... at the CapProbe epoch start (<= 64 rounds) */
		u8 drain_slot;	   /* low 8 bits of the last drain's slot */
	};
	u8 pair_state; /* enum ccpd_pair_state */
	u8 phase;      /* CCL_PHASE_SS / _CA / _SS_RTO */
	u8 e_valid;    /* law_e_prev_q10 is from the previous round */
	union {
		u8 cp_age;   /* CapProbe epochs since cap_sps was last refreshed */
		u8 sh_alone; /* the last drain found the queue empty with the
			      * path's ccpd flows carrying >= 3/4 C (ccpd_rate_fall) */
	};
	u8 last_loss;	  /* enum ccpd_loss_class of the last loss event */
	u8 round_samples; /* RTT samples of this round */
};

/* What one ACK tells the controller (copied from tcp_sock and rate_sample). */
struct ccpd_ack {
	u64 now_ns;	     /* ktime, ns: packet-pair dispersion only */
	u32 now_us;	     /* (u32) tcp_mstamp */
	u32 ca_state;	     /* CCL_CA_* in force for this ACK */
	u32 snd_cwnd;	     /* segments */
	u32 cwnd_clamp;	     /* snd_cwnd_clamp */
	u32 in_flight;	     /* packets in flight */
	u32 mss;	     /* bytes */
	u32 acked;	     /* rs->acked_sacked */
	s32 rtt_us;	     /* rs->rtt_us, < 0 = no sample */
	u32 delivered;	     /* rs->delivered */
	s32 interval_us;     /* rs->interval_us */
	s32 losses;	     /* rs->losses */
	u32 app_limited;     /* rs->is_app_limited */
	u32 cwnd_limited;    /* tcp_is_cwnd_limited() */
	u32 has_prior;	     /* rs->prior_mstamp != 0 */
	u32 prior_delivered; /* rs->prior_delivered */
	u32 tp_delivered;    /* tp->delivered */
	u32 snd_una;
	u32 snd_nxt;
	u32 srtt_us;  /* the kernel's smoothed RTT (tp->srtt_us >> 3), us: of every
		       * sample, where ccpd's own is held to Little's bound */
	u32 path_sps; /* share, at a drain's end (ccpd_drain_ends): the rates the
		       * path's ccpd flows carried before this slot's drain,
		       * summed (segments/s; 0 = none) */
};

struct ccpd_out {
	u32 snd_cwnd; /* the window to write */
	u32 reno_ai;  /* caller runs tcp_cong_avoid_ai(acked) on snd_cwnd instead */
	u32 round_start;
	u32 controlled; /* the law produced this window */
	u32 c_sps;	/* capacity used */
	u32 g_q10;	/* derivative gain of this round */
	u32 ev;		/* enum ccpd_ev bits */
	s32 losses;	/* packets lost while holding (for the stats) */
	u32 drain_sps;	/* share: a drain began, at this rate (segments/s) */
	u32 drain_slot; /* ... in this drain_ms slot of the host's clock */
	u32 law;	/* enum ccpd_law_in_force */
	u32 mode;	/* enum ccpd_mode this ACK ran in */
	struct ccpd_law l;
};

CCL_CORE void ccpd_on_init(struct ccpd *ca, u32 delivered, u32 now_us)
{
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->rtt_min_us = CCL_U32_MAX;
	ca->cp_best_dsum_us = CCL_U32_MAX;
	ca->round_min_us = CCL_U32_MAX;
	ca->phase = CCL_PHASE_SS;
	ccl_round_reset(&ca->round, delivered);
	ca->round_start_us = now_us;
}

CCL_CORE u32 ccpd_rtts(const struct ccpd *ca)
{
	return ca->rtts_q3 >> 3;
}

/*
 * The RTT the L1 law reads its queue from, at a round start: the smoothed
 * RTT s (q_rtt 0, the paper) less the noise it carries, or the round's
 * smallest sample (q_rtt 1, as Vegas).  RTT noise (ACK batching, timer and
 * scheduling jitter) only adds delay, so s sits above the queue's delay by
 * the noise's mean, while the round's smallest sample carries the least of
 * it.  With q_rtt 0 the law subtracts s - round_min, up to noise_us:
 *   s' = s - min(s - round_min, noise_us)
 * noise_us (q_noise, default 500) is the largest mean noise it takes for
 * noise: a host's ACK path carries a mean noise of that order, as large as
 * the queue of a 10-packet buffer at 100 Mbit/s, while on deeper buffers
 * 0.5 ms is a small part of the queue the law targets, so a queue that
 * swings within a round (whose minimum then reads low) cannot hide
 * (docs/ccpd.md, "How ccload reads it").
 * round_min CCL_U32_MAX: no sample this round, s as it is.
 */
CCL_CORE u32 ccpd_law_rtt(u32 s, u32 round_min, u32 q_rtt, u32 noise_us)
{
	u32 spread;

	if (round_min == CCL_U32_MAX)
		return s;
	if (q_rtt == 1)
		return round_min;
	spread = s > round_min ? s - round_min : 0;
	return s - (spread < noise_us ? spread : noise_us);
}

/*
 * q_little: how much of the smoothed RTT is the link's own delay, not a
 * queue.  Little's law for the flow: in a steady round its F packets in
 * flight pass the bottleneck at its delivery rate fb, so its RTT is F / fb,
 * queue included, whoever built the queue.  The excess
 *   s - max(m, 17/16 F / fb)
 * (1/16 of slack for fb's noise) is delay no packet of the flow's explains:
 * a cellular scheduler's gap, an outage, a stall.  The law takes up to that
 * excess of the round's spread s - round_min for noise (ccpd_law_rtt, where
 * q_noise is the bound otherwise): the round's smallest sample still carries
 * a queue that stands through the round, while a gap that delayed part of
 * the round is not read as a queue of C (s - m) that no window of the
 * flow's holds (one 50-ms gap of an LTE trace cut a 30-segment window to 20
 * in a round, docs/ccpd.md, "Variable links").  Only while the flight is under
 * the flow's own pipe, F < fb m: its packets then explain no queueing at
 * all, whatever the RTT reads, while a flow above it may have built a
 * queue, and a host stall's ACK burst, which the law must answer, lands
 * there (with the excess taken there too, or under P = C m with C up to
 * 1.25 fb, a 20-ms stall on a 10-ms path with ACK jitter lifted B by a
 * quarter in the closed-loop model).  Alone, as a bound on s, it
 * clipped a real queue: fb is a max over 10-20 rounds, and after the link's
 * rate falls it reads the old rate (a 3G trace's buffer filled, 582 ms).
 * 0 without a delivery rate, and at or above the flow's own pipe.
 */
CCL_CORE u32 ccpd_little_excess(u32 s, u32 m, u32 in_flight, u32 fb)
{
	u64 little;

	if ((u64)in_flight * CCL_USEC_PER_SEC >= (u64)fb * m)
		return 0;
	little = (u64)in_flight * 17000000 / 16 / fb;
	little = little > m ? little : m;
	return (u64)s > little ? (u32)(s - little) : 0;
}

/*
 * The RTT noise floor n, where m is under a millisecond, at a round start in
 * Open.  On such a path the hosts (ACK and softirq batching, wakeups, a
 * userspace hop) add to every RTT sample a delay as large as a shallow
 * buffer's, and the round's smallest sample, which the law reads its queue
 * from (ccpd_law_rtt), sits above m, the smallest sample ever, by that
 * noise: the law reads a queue that is not there and holds the window under
 * the pipe.  n is what the round's smallest sample carries over m where no
 * queue can stand, and the law reads m + n as its base RTT (ccpd_law_m):
 *   e = max(round_min - m, 0)
 *   n += (e - n) / 8   if e < n, or
 *                      if e > n and w < C m (a window under the pipe
 *                      builds no queue)
 *   n <= q_floor,  n /= 2 on a loss (ccpd_on_ssthresh)
 * A round whose smallest sample is under m + n shows the floor lower, with
 * or without a queue.  Where the noise is larger than the buffer (a few
 * packets on a path of tens of us) no floor is right: the law cannot see
 * the queue either way, and a floor at the noise would hold the window
 * through every overflow.  The halving on a loss keeps n where the buffer
 * stops overflowing: additive up, multiplicative down, as a window.  A
 * competitor's queue read while the flow's window is under the pipe is
 * taken for noise, up to q_floor (250 us by default), and the drains
 * (ccpd_drain), which empty the queue, take it out again.  Paths of a
 * millisecond and more (every WAN) keep n = 0: their m and queue dwarf
 * the hosts' noise (docs/ccpd.md, "Paths of microseconds").
 */
CCL_CORE void ccpd_noise_round(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 round_min,
			       u32 w, u32 c_sps)
{
	u32 m = ca->rtt_min_us, n = ca->noise_us, e;

	if (m == CCL_U32_MAX || m >= CCPD_NOISE_M_MAX_US || !p->q_floor_us) {
		ca->noise_us = 0;
		return;
	}
	if (round_min == CCL_U32_MAX)
		return;
	/* under m (m at rtt_floor, over the path's own RTT): no noise over m */
	e = round_min > m ? round_min - m : 0;
	if (e < n)
		n -= (n - e + 7) / 8;
	else if (e > n && ((u64)w << 10) < ccl_segs_q10(c_sps, m))
		n += (e - n) / 8;
	ca->noise_us = n < p->q_floor_us ? n : p->q_floor_us;
}

CCL_CORE u32 ccpd_fb(const struct ccpd *ca)
{
	return ca->fb_cur > ca->fb_prev ? ca->fb_cur : ca->fb_prev;
}

/*
 * The capacity estimate, with its cap: C = cap ? max(cap, fb) : fb, and C <= 1.25 fb.  A
 * capacity below a measured delivery rate is impossible; one far above it is
 * a compressed pair (token-bucket burst at an idle start, ACK batching), and
 * an overestimate lifts the clamp above the path storage.
 */
CCL_CORE u32 ccpd_capacity(const struct ccpd *ca)
{
	u32 fb = ccpd_fb(ca);
	u64 c = ca->cap_sps > fb ? ca->cap_sps : fb;

	/*
	 * Sharing: fb is the flow's own share of the link, not the link, and a
	 * cap at 1.25 fb made every estimate (P, B, x, the clamp P + B - margin)
	 * proportional to the flow's own rate.  The law then has no restoring
	 * force between flows, and a flow's clamp shrinks with its own rate
	 * round after round while its pairs read the link.  With share, C is
	 * the pairs' running
	 * median (taken in CA only, so no idle-start token-bucket burst), never
	 * below fb.
	 */
	if (fb && !(ca->sh & CCPD_SH_ON))
		c = ccl_min64(c, (u64)fb * CCPD_CAP_OVER_FB_Q10 >> 10);
	return (u32)c;
}

/*
 * Clamp: cwnd_max = min(snd_cwnd_clamp, P + B - margin), margin =
 * max(2, B/8): below the path storage, so the law's own window never
 * overflows the buffer.  Never below cwnd_min.  The law's clamp takes P and
 * B from C, which may run 25 % ahead of the delivery rate: that headroom is
 * how the window grows past what it delivers now.  From the delivery rate
 * (ccpd_storage_est) it would allow fb m + B - margin, about one packet a
 * round above the current rate, and a window a stall had cut would stay
 * near what it delivers; the congestive hold, which must stay below the
 * storage, takes it from the delivery rate.
 */
CCL_CORE u32 ccpd_cwnd_max(const struct ccpd_est *e, u32 cwnd_min, u32 cwnd_clamp)
{
	u64 b = e->b_q10 >> 10, margin = ccl_max64(2, b / 8);
	u64 store = ((u64)e->p_q10 + e->b_q10) >> 10;
	u64 m = store > margin ? store - margin : 0;

	m = ccl_min64(ccl_min64(m, cwnd_clamp), CCL_U32_MAX);
	return (u32)ccl_max64(m, cwnd_min);
}

/*
 * The base RTT the law reads: m plus the RTT noise floor n (ccpd_noise_round),
 * which is 0 where m is a millisecond or more.  0 = no sample yet.
 */
CCL_CORE u32 ccpd_law_m(const struct ccpd *ca)
{
	return ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us + ca->noise_us : 0;
}

/* The estimates for the flow's current state and capacity c. */
CCL_CORE void ccpd_estimate_of(const struct ccpd *ca, u32 c, u32 b_min, struct ccpd_est *e)
{
	u32 m = ccpd_law_m(ca);

	ccpd_estimate(c, m, ca->rtt_max_us, ccpd_rtts(ca), b_min, e);
}

/*
 * The path storage for the congestive hold: P and B from the delivery-rate
 * maximum fb (C when there is none yet), not from C.  C may sit 25 % above
 * fb (CCPD_CAP_OVER_FB_Q10: compressed pairs), and 25 % of the pipe is more
 * than a buffer of BDP/8: a hold from C can sit above the storage and lock
 * the flow in Recovery.  A delivery rate cannot exceed the link.
 */
CCL_CORE void ccpd_storage_est(const struct ccpd *ca, u32 c, u32 b_min, struct ccpd_est *e)
{
	u32 fb = ccpd_fb(ca);

	ccpd_estimate_of(ca, fb ? fb : c, b_min, e);
}

/*
 * The L1 equilibrium window, in segments:
 *   target = w m / s + Kp B / (1 + 2 Kp)
 * (the flow's pipe share plus the equilibrium queue x* = Kp B / (1 + 2 Kp)),
 * with the pipe share also bounded by P = C m, and the whole at most cwnd_max.
 */
CCL_CORE u32 ccpd_law_target(const struct ccpd *ca, u32 w, const struct ccpd_est *e, u32 kp_q10,
			     u32 cwnd_max)
{
	u32 m = ccpd_law_m(ca);
	u32 s = ccpd_rtts(ca) > m ? ccpd_rtts(ca) : m;
	u64 share = s ? (u64)w * m / s : w;
	u64 q = (u64)e->b_q10 * kp_q10 / (CCL_Q10 + 2 * (u64)kp_q10) >> 10;

	share = ccl_min64(share, e->p_q10 >> 10);
	return (u32)ccl_min64(share + q, cwnd_max);
}

#define CCPD_BURST_LOSSES 3 /* losses in one Recovery that make it congestive */

/* The buffer's delay the flow has learnt, rtt_max - rtt_min, us (0 before
 * rtt_max passes rtt_min). */
CCL_CORE u32 ccpd_qmax_us(const struct ccpd *ca)
{
	return ca->rtt_max_us > ca->rtt_min_us ? ca->rtt_max_us - ca->rtt_min_us : 0;
}

/* A drain's bound for "no queue": max(qmax/8, CCPD_COMP_EXIT_US). */
CCL_CORE u32 ccpd_comp_exit_us(const struct ccpd *ca)
{
	u32 q = ccpd_qmax_us(ca) / 8;

	return q > CCPD_COMP_EXIT_US ? q : CCPD_COMP_EXIT_US;
}

/* A loss re-learns rtt_max from the smoothed RTT s (bmax_on_loss); with
 * share the path hears of it (ccpd_path_sync). */
CCL_CORE void ccpd_relearn_bmax(struct ccpd *ca, u32 s, u32 m)
{
	ca->rtt_max_us = s > m ? s : m;
	if (ca->sh & CCPD_SH_ON)
		ca->sh |= CCPD_SH_QLOSS;
}

/* A window to hold in Recovery: never below cwnd_min, nor 2. */
CCL_CORE u32 ccpd_hold_floor(const struct ccl_ccpd_params *p, u32 h)
{
	u32 lo = p->cwnd_min > 2 ? p->cwnd_min : 2;

	return h > lo ? h : lo;
}

/*
 * The congestive hold for a window w that filled the storage: min(w, target),
 * target the L1 equilibrium window of the storage estimate (below the path
 * storage).  In CA with bmax_on_loss (1: congestive losses, 2: every loss)
 * B first comes down to the queueing delay seen now: the loss says the
 * storage is full at that delay.  Otherwise an overestimated B (RTT noise and
 * stalls lift the smoothed maximum, which only grows) keeps the law target,
 * and so the hold, above the storage, and every round overflows.
 */
CCL_CORE u32 ccpd_cong_hold(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 c, u32 w,
			    u32 cwnd_clamp)
{
	u32 m = ca->rtt_min_us, s = ccpd_rtts(ca), cmax, target, pfb;
	struct ccpd_est st;

	/* Competing (share): 0.7 W, as the loss-based flow that keeps the
	 * queue full does; the law's target would hand it the link. */
	if (p->share && (ca->sh & CCPD_SH_COMP) && ca->phase == CCL_PHASE_CA) {
		ca->sh |= CCPD_SH_CLOSS;
		return (u32)((u64)w * CCPD_COMP_BETA_Q10 >> 10);
	}
	/* (not from a drain's RTT: the drain takes the queue away, and B would
	 * fall to b_min on a random loss judged at the clamp) */
	if (ca->phase == CCL_PHASE_CA && p->bmax_on_loss && !(ca->sh & CCPD_SH_DLOSS))
		ccpd_relearn_bmax(ca, s, m);
	ccpd_storage_est(ca, c, p->b_min, &st);
	cmax = ccpd_cwnd_max(&st, p->cwnd_min, cwnd_clamp);
	target = ccpd_law_target(ca, w, &st, p->kp_q10, cmax);
	/*
	 * The loss says w filled the storage: w >= P + B with the real P and
	 * B.  The pipe read from the delivery rate, P_fb <= P, so w - P_fb >= B,
	 * and the hold
	 *   P_fb + Kp (w - P_fb) / (1 + 2 Kp)
	 * leaves at most the equilibrium share of the buffer queued, whatever
	 * C and rtt_max say.
	 */
	pfb = st.p_q10 >> 10;
	if (pfb && w > pfb) {
		u64 over = (u64)(w - pfb) * p->kp_q10 / (CCL_Q10 + 2 * (u64)p->kp_q10);

		target = (u32)ccl_min64(target, pfb + over);
	}
	return w < target ? w : target;
}

/* Rtt_min, smoothed RTT (gain 1/8), rtt_max of the smoothed RTT.  (Not of
 * round minima: those are free of noise, but after a slow-start exit
 * without a standing queue B would stay at b_min, and the law's growth,
 * gamma Kp B per round, would fill a long pipe in tens of seconds.)
 *
 * A sample's queueing part is bounded by what was in flight ahead of its
 * packet: the packets queued ahead of it were sent before it and delivered
 * before its ACK, so with n = packets delivered while it was out (the
 * kernel's ack_sample->in_flight / mss)
 *   r <= m + n / C.
 * A longer sample is a stall of the path or of a host, not a queue, and is
 * clamped to the bound before it reaches the smoothed RTT and rtt_max.
 * rtt_max only grows, so one unclamped stall would stand in B for the rest
 * of the flow, B would exceed the buffer, and the law would fill it every
 * few rounds.  The bound is loose by the pipe P (a full
 * pipe holds P of the packets in flight), so it never clips a real queue at
 * buffers up to 4 BDP even with C overestimated by the 1.25 cap.
 *
 * rtt_max takes a tighter, steady-state bound.  On a busy, ACK-clocked path
 * a packet's n is the flight ahead of it, pipe and queue, so Little's law
 * gives its RTT exactly: r = n / C.  So rtt_max only rises to
 *   min(s, 17/16 n / fb, never below m)
 * (fb = the delivery-rate max <= C; 1/16 of slack for its noise).  A stall
 * that the loose bound lets through at short RTTs (a 20-ms stall is within
 * m + n / C when m = 10 ms) is stopped here, where it would otherwise
 * lift B, and the standing queue with it, for the rest of the flow.
 * It is no bound for the smoothed RTT the law reads: after a burst into an
 * empty pipe, or while fb still holds a rate the flow had before a
 * competitor came, it clips a real queue; B then learns it a little later.
 */
CCL_CORE void ccpd_rtt_sample(struct ccpd *ca, s32 rtt, u32 delivered_out)
{
	u32 r, c, s, fb;

	if (rtt <= 0)
		return;
	r = (u32)ccl_min64(rtt, 10000000);
	if (r < ca->rtt_min_us)
		ca->rtt_min_us = r;
	/* With share C is the link's, but n counts the flow's own packets, and
	 * the packets of other flows queued ahead of it are not in n: the bound
	 * takes the flow's own delivery rate (Little's law for one flow of a
	 * FIFO).  From C, eight flows each read 8-12 ms of a 36-ms queue. */
	c = ccpd_capacity(ca);
	if ((ca->sh & CCPD_SH_ON) && ccpd_fb(ca))
		c = ccpd_fb(ca);
	if (c && delivered_out) {
		u64 bound = ca->rtt_min_us + (u64)delivered_out * 1000000 / c;

		if (r > bound)
			r = (u32)bound;
	}
	if (!ca->rtts_q3)
		ca->rtts_q3 = r << 3;
	else
		ca->rtts_q3 += r - (ca->rtts_q3 >> 3);
	/* A sample of a flow with a few packets in flight may hold the
	 * receiver's delayed ACK (40 ms and more on Linux) and says nothing of
	 * the buffer: a flow a cubic's slow start pushed down to 2 segments
	 * read 120 ms on a 40-ms path whose 1-BDP buffer holds 40 ms, and the
	 * doubled rtt_max - m kept its drains from seeing the cubic's queue
	 * (docs/ccpd.md, "A window of two beside a cubic"). */
	if (delivered_out && delivered_out < CCPD_RTT_MAX_MIN_N)
		return;
	s = ccpd_rtts(ca);
	fb = ccpd_fb(ca);
	if (fb && delivered_out) {
		/* Little: s <= (1 + 1/16) n / fb, never below m */
		u64 little = (u64)delivered_out * 17000000 / 16 / fb;

		little = ccl_max64(little, ca->rtt_min_us);
		if (s > little)
			s = (u32)little;
	}
	if (s > ca->rtt_max_us)
		ca->rtt_max_us = s;
}

/*
 * share: the capacity is a running quantile of the pair samples (frugal
 * streaming: 1/16 of the estimate toward a sample above it, 1/16 or 1/48
 * toward one below).  Pairs through a busy FIFO read the link, but some
 * read a compressed ACK pair (2x and more) and some a pair split by another
 * flow's packets; a median ignores both where each is a minority, where
 * CapProbe's minimum-RTT-sum rule picks the pair that saw no queue, which
 * on a token bucket is the burst.  Competing (CCPD_SH_COMP: a loss-based
 * flow keeps a standing queue) the split pairs are no minority: between two
 * of a flow's packets the FIFO holds about (1 - x) / x of the competitor's
 * at the flow's share x, so the samples read nearer x than the link the
 * smaller x is: beside a cubic the median reads below the link, and the
 * upper quartile reads it (docs/ccpd.md, "Sharing a bottleneck").  So
 * competing, the estimate moves down a third as fast as up: the upper
 * quartile (ccpd_has_half allows for its excess).  It starts from the first sample, within
 * [fb, 2 fb].
 */
CCL_CORE u32 ccpd_median_step(u32 med, u32 c, u32 fb, bool upper)
{
	u32 step;

	if (!med) {
		if (fb && c > 2 * (u64)fb)
			return (u32)ccl_min64(2 * (u64)fb, CCL_U32_MAX);
		return c > fb ? c : fb;
	}
	step = med >> CCPD_MED_SHIFT;
	step = step ? step : 1;
	if (c > med)
		return c - med < step ? c : med + step;
	if (upper)
		step = step / 3 ? step / 3 : 1;
	return med - c < step ? c : med - step;
}

/* Packet-pair probe; adv = bytes acked beyond the pair's start. */
CCL_CORE u32 ccpd_pair_ack(struct ccpd *ca, const struct ccl_ccpd_params *p,
			   const struct ccpd_ack *a)
{
	u32 u = p->probe_segs * a->mss, ev = 0;
	s32 adv = (s32)(a->snd_una - ca->pair_seq);

	if (ca->pair_state == CCPD_PAIR_IDLE)
		return 0;
	if ((u8)(ca->round.cnt - ca->pair_round) > 2) {
		ca->pair_state = CCPD_PAIR_IDLE;
	} else if (ca->pair_state == CCPD_PAIR_ARMED) {
		if (adv >= (s32)(2 * u)) {
			ca->pair_state = CCPD_PAIR_IDLE; /* one ACK covered both */
		} else if (adv >= (s32)u) {
			ca->pair_t1_ns = (u32)a->now_ns;
			ca->pair_rtt1_us = a->rtt_us > 0 ? (u32)a->rtt_us : 0;
			ca->pair_state = CCPD_PAIR_HALF;
		}
	} else if (adv >= (s32)(2 * u)) { /* CCPD_PAIR_HALF */
		u64 d = (u32)((u32)a->now_ns - ca->pair_t1_ns);

		ev = CCPD_EV_PAIR_REJECT;
		if (adv < (s32)(3 * u) && d >= p->pair_min_ns && d > 0 && a->rtt_us > 0 &&
		    ca->pair_rtt1_us) {
			/* Eq. 4: C = MSS / d, in segments/s. */
			u64 c = (u64)p->probe_segs * CCL_NSEC_PER_SEC / d;
			u64 cmax = p->cap_max_mbps ? (u64)p->cap_max_mbps * 125000 / (a->mss ?: 1) :
						     ~0ULL;
			u32 dsum = ca->pair_rtt1_us + (u32)a->rtt_us;

			if (c <= cmax && (ca->sh & CCPD_SH_ON)) {
				ev = CCPD_EV_PAIR_OK;
				if (ca->phase == CCL_PHASE_CA)
					ca->cap_sps = ccpd_median_step(ca->cap_sps, ccl_sat32(c),
								       ccpd_fb(ca),
								       ca->sh & CCPD_SH_COMP);
			} else if (c <= cmax) {
				ev = CCPD_EV_PAIR_OK;
				/* CapProbe: keep the sample whose RTT sum is minimal. */
				if (dsum < ca->cp_best_dsum_us) {
					ca->cp_best_dsum_us = dsum;
					ca->cp_best_c_sps = ccl_sat32(c);
				}
			}
		}
		ca->pair_state = CCPD_PAIR_IDLE;
	}
	return ev;
}

/* A new delivery-rate epoch: the current maximum becomes the previous. */
CCL_CORE void ccpd_fb_epoch(struct ccpd *ca, u8 start)
{
	ca->fb_prev = ca->fb_cur;
	ca->fb_cur = 0;
	ca->fb_epoch_round = start;
}

#define CCPD_RATE_WIN_US 1000	  /* delivery-rate window, where rounds are shorter */
#define CCPD_RATE_WIN_MAX_US 4000 /* a longer window is a pause: no sample */

/*
 * Where the base RTT m is under a millisecond (a LAN, a datacenter), the
 * delivery rate is measured over windows of at least CCPD_RATE_WIN_US, not
 * per ACK.  The kernel's rate sample spans one RTT, a few tens of us there,
 * and with TSO/GSO and GRO that is one to three 64-KiB bursts: its samples
 * range from 0 to several times the rate the flow carries, and the samples
 * app-limited flows get are discarded, so for whole epochs there may be
 * none.  fb would then read 0 (P = C m = 0, and the window falls to the
 * floor in one round) or the burst's rate.  Over a
 * millisecond the bursts average out, and an app-limited window is a lower
 * bound of the rate like any other.  Epochs are then counted in windows
 * (10 ms), not rounds.  Paths of a millisecond and more keep the kernel's
 * samples: a sample spans m there, and nothing of their behaviour changes.
 */
CCL_CORE bool ccpd_rate_windowed(const struct ccpd *ca)
{
	return ca->phase == CCL_PHASE_CA && ca->rtt_min_us < CCPD_RATE_WIN_US;
}

/* Delivery rate over the window ending now (delivered: tp->delivered), in
 * segments/s; 0 while the window is open, or when it spanned a pause. */
CCL_CORE u32 ccpd_rate_window(struct ccpd *ca, u32 now_us, u32 delivered)
{
	u32 elapsed = now_us - ca->rw_start_us, r = 0;

	if (ca->rw_start_us && elapsed < CCPD_RATE_WIN_US)
		return 0;
	/* fb = delivered in the window / its length (u16: 16M segments/s) */
	if (ca->rw_start_us && elapsed <= CCPD_RATE_WIN_MAX_US)
		r = (u32)((u64)(u16)((u16)delivered - ca->rw_start_dlv) * CCL_USEC_PER_SEC /
			  elapsed);
	ca->rw_start_us = now_us ? now_us : 1;
	ca->rw_start_dlv = (u16)delivered;
	return r;
}

/* The delivery-rate maximum fb, one ACK's worth (Open, Disorder, CWR). */
CCL_CORE void ccpd_delivery_rate(struct ccpd *ca, const struct ccpd_ack *a)
{
	u32 r;

	if (ccpd_rate_windowed(ca)) {
		r = ccpd_rate_window(ca, a->now_us, a->tp_delivered);
		if (!r)
			return;
		if (r > ca->fb_cur)
			ca->fb_cur = r;
		if (++ca->fb_epoch_round >= CCPD_FB_EPOCH_ROUNDS)
			ccpd_fb_epoch(ca, 0);
		return;
	}
	if (a->interval_us > 0 && a->delivered > 0 && !a->app_limited) {
		u64 dr = (u64)a->delivered * CCL_USEC_PER_SEC / (u64)a->interval_us;

		if (dr > ca->fb_cur)
			ca->fb_cur = ccl_sat32(dr);
	}
}

/*
 * The delivery-rate and CapProbe epochs, at a round start in Open: epochs are counted in rounds since the
 * epoch began, so a boundary that fell in Recovery/Loss is taken now.  The start rounds are kept modulo
 * 256 (epochs are at most 64 rounds): only a flow that spends 256 rounds outside Open can see a
 * boundary come up to one epoch late.
 */
CCL_CORE void ccpd_epochs(struct ccpd *ca, const struct ccl_ccpd_params *p)
{
	if (!ccpd_rate_windowed(ca) &&
	    (u8)(ca->round.cnt - ca->fb_epoch_round) >= CCPD_FB_EPOCH_ROUNDS)
		ccpd_fb_epoch(ca, (u8)ca->round.cnt);
	if (ca->sh & CCPD_SH_ON)
		return;
	if ((u8)(ca->round.cnt - ca->cp_epoch_round) >= p->cap_epoch) {
		if (ca->cp_best_dsum_us != CCL_U32_MAX) {
			ca->cap_sps = ca->cp_best_c_sps;
			ca->cp_age = 0;
		} else if (ca->cap_sps && ++ca->cp_age >= CCPD_CAP_EXPIRY_EPOCHS) {
			ca->cap_sps = 0; /* stale: the path may have changed */
			ca->cp_age = 0;
		}
		ca->cp_best_dsum_us = CCL_U32_MAX;
		ca->cp_epoch_round = (u8)ca->round.cnt;
	}
}

#define CCPD_SS_EXIT_MIN_US 4000 /* queueing-delay threshold bounds (as HyStart) */
#define CCPD_SS_EXIT_MAX_US 16000
#define CCPD_SS_EXIT_MIN_CWND 16
#define CCPD_SS_EXIT_SAMPLES 8
#define CCPD_TRAIN_GAP_US 2000 /* ACKs closer than this continue a train */
#define CCPD_GAP_SHIFT 5       /* ss_round_gap counts 32-us units */
#define CCPD_GAP_FULL 0xffff   /* ss_round_gap saturated: no train this round */
#define CCPD_SSQ_MIN_US 1000   /* paced exit: a queue of clamp(m / 32, these) */
#define CCPD_SSQ_MAX_US 4000
#define CCPD_SSQ_SAMPLES 4 /* ... in this many samples in a row, over m / 16 */

/*
 * Slow-start exit on delay (ss_exit = 1), HyStart's signal: the smallest of
 * the first CCPD_SS_EXIT_SAMPLES RTT samples of the current round has risen
 * by clamp(rtt_min / 8, 4 ms, 16 ms) over rtt_min, i.e. the window passed the
 * pipe in the previous round and a queue stands between rounds.  The first
 * samples of a round, not a smoothed RTT: unpaced slow-start trains leave at
 * twice the bottleneck rate and queue half the window inside every round even
 * far below the pipe, while the head of a train sees only a standing queue;
 * and checked at the start of the round, not at its end, because the window
 * doubles within the round.  Even so the delay signal lags (an RTT sample
 * reports the queue when its packet was sent), so HyStart's second signal
 * ends slow start too: the ACKs of the round have arrived as a train for
 * rtt_min / 2, so the window has reached the pipe.  Growth stops there and
 * the law takes over; waiting for the first loss instead (the paper) doubles
 * the window past the path storage and retransmits the overshoot.
 *
 * The train's length is the time since the round started less the round's
 * ACK gaps over 2 ms, i.e. the sum of its inter-ACK intervals under 2 ms.
 * HyStart instead ends the train at its first gap, for the whole round: a
 * delay line or a host that pauses a few ms inside a 150-ms train then hides
 * it, and the window doubles once more, past the path storage.  A round of
 * W segments still counts only W / C of train time, whatever its gaps, so
 * the exit stays at W >= pipe / 2.
 */
CCL_CORE bool ccpd_ss_queue_seen(u32 m, u32 s, u32 cwnd)
{
	u32 thr = m / 8;

	if (!m || cwnd < CCPD_SS_EXIT_MIN_CWND)
		return false;
	thr = thr < CCPD_SS_EXIT_MIN_US ? CCPD_SS_EXIT_MIN_US : thr;
	thr = thr > CCPD_SS_EXIT_MAX_US ? CCPD_SS_EXIT_MAX_US : thr;
	return (u64)s >= (u64)m + thr;
}

/*
 * Slow-start exit on the queue of the moment (pace = 1).  Paced at twice the
 * window per smoothed RTT, slow start queues once the window passes half the
 * pipe, and any sign of that queue reaches the sender an RTT later, when the
 * window has grown by another pipe.  Both exits above then come a doubling
 * late: a round's first samples are of packets sent at its start, before its
 * queue; and a paced round's ACKs never gap, so its "train" is the round
 * itself, which lasts m only once the round's RTT has risen, at about twice
 * the pipe, a 1-BDP buffer's storage, or past it.  So, paced, slow start
 * also ends when the RTT samples have shown a queue of clamp(m / 32, 1 ms,
 * 4 ms) for m / 16 and at least CCPD_SSQ_SAMPLES samples in a row: the
 * window is then about 1.3-1.5 pipes, under a BDP/2 buffer's storage.  Any
 * sample under the threshold restarts the run, so RTT noise, which only
 * adds delay and comes in spikes, does not end slow start.
 * The queue is counted from the last round's smallest sample, as HyStart++
 * counts it, not from m: a flow that starts into another's standing queue
 * then leaves slow start when its own window adds to that queue, not at
 * once, a small fraction of its share.  A queue
 * that rises in the flow's first round (no last round yet), as a shorter
 * flow's slow start makes it, still ends it early (docs/ccpd.md, "Sharing
 * a bottleneck").  Alone, the last round's smallest sample is m until the
 * flow's own queue stands between rounds.
 */
CCL_CORE bool ccpd_ss_paced_queue(struct ccpd *ca, u32 m, s32 rtt_us, u32 now_us)
{
	u32 thr = m / 32;

	if (rtt_us <= 0 || !m)
		return false;
	thr = thr < CCPD_SSQ_MIN_US ? CCPD_SSQ_MIN_US : thr;
	thr = thr > CCPD_SSQ_MAX_US ? CCPD_SSQ_MAX_US : thr;
	if ((u64)(u32)rtt_us < (u64)m + ((u32)ca->ssq_base << CCPD_GAP_SHIFT) + thr) {
		ca->ssq_n = 0;
		return false;
	}
	if (!ca->ssq_n)
		ca->ssq_since_us = now_us;
	if (ca->ssq_n < 0xff)
		ca->ssq_n++;
	return ca->ssq_n >= CCPD_SSQ_SAMPLES && now_us - ca->ssq_since_us >= m / 16;
}

/*
 * A slow-start round ends: its smallest RTT sample, over m, is the next
 * round's baseline for ccpd_ss_paced_queue (32-us units, saturating).  A
 * round of fewer than CCPD_SSQ_SAMPLES samples leaves no baseline (the
 * saturated value: the paced exit waits for a round that sets one): its
 * smallest sample is not the path's.  iperf3's data stream opens with one
 * 37-byte packet (its cookie) and a pause; that round's one sample set m
 * and a baseline of 0, and on a cellular link whose own delay varies by
 * 5-10 ms the next round's samples all read as a queue over that baseline:
 * slow start ended at 16 segments, a third of the pipe (docs/ccpd.md,
 * "Variable links").
 */
CCL_CORE void ccpd_ss_round(struct ccpd *ca, u32 round_min)
{
	u32 m = ca->rtt_min_us, q;

	if (ca->round_samples < CCPD_SSQ_SAMPLES) {
		ca->ssq_base = 0xffff;
		return;
	}
	if (round_min == CCL_U32_MAX || m == CCL_U32_MAX || round_min <= m) {
		ca->ssq_base = 0;
		return;
	}
	q = (round_min - m) >> CCPD_GAP_SHIFT;
	ca->ssq_base = q < 0xffff ? q : 0xffff;
}

/*
 * ss_exit = 2: the delay test's exit waits for the end of the round that
 * showed it, the window growing at a quarter of slow start's rate, and is
 * taken only if the whole round's smallest sample (round_min, the round
 * just ended) still shows the queue; otherwise slow start goes on.
 * HyStart++'s conservative slow start (RFC 9406) confirms its delay exit
 * the same way, by an RTT that falls back, over up to 5 rounds; one here,
 * and the paced exit (ccpd_ss_paced_queue, which counts the queue from the
 * last round's smallest sample and so does not see a delay every round
 * has) and the ACK train end slow start at once as before.
 * A queue that stands (the flow's own) is in every sample of the round
 * after the window passed the pipe; a cellular scheduler's gap is in some
 * of them (docs/ccpd.md, "Variable links").  Returns whether slow start
 * ends here.
 */
CCL_CORE bool ccpd_ss_confirm(struct ccpd *ca, u32 round_min)
{
	u32 m = ca->rtt_min_us;

	if (!ca->ss_css)
		return false;
	ca->ss_css = 0;
	return m != CCL_U32_MAX && round_min != CCL_U32_MAX &&
	       ccpd_ss_queue_seen(m, round_min, CCPD_SS_EXIT_MIN_CWND);
}

/* Slow start ends: the law takes over from the window w (segments) with no
 * derivative memory (its fields held the paced exit's sample run). */
CCL_CORE void ccpd_ss_end(struct ccpd *ca, u32 w)
{
	ca->phase = CCL_PHASE_CA;
	ca->rw_start_us = 0;				/* it held the ACK-train check's state */
	ca->fall_round = (u16)(ca->round.cnt + 0x8000); /* (ss_round_gap's): none read */
	ca->e_valid = 0;
	ca->law_e_prev_q10 = 0;
	ca->law_dterm_q10 = 0;
	ca->w_q10 = (u32)ccl_min64((u64)w << 10, CCL_U32_MAX);
}

/* gamma auto: 1 / (1 + 2 Kp), inside the one-round-delay stability bound. */
CCL_CORE u32 ccpd_gamma_of(const struct ccl_ccpd_params *p)
{
	return p->gamma_q10 ? p->gamma_q10 : ccpd_gamma_auto_q10(p->kp_q10);
}

/* probe_up's bound on B for ccpd_law_l1: 2 b_min while the flow has lost
 * nothing (B is a guess until a loss or a queue teaches it), else 0 (off). */
CCL_CORE u32 ccpd_probe_b_q10(const struct ccl_ccpd_params *p, u32 last_loss)
{
	return p->probe_up && last_loss == CCPD_LOSS_NONE ? (2 * p->b_min) << 10 : 0;
}

/*
 * A Recovery whose loss was random keeps the law running (in slow start,
 * slow start, up to one doubling of the window held at entry): the window
 * goes on from the one held at entry (ccpd_on_ssthresh), the Recovery's RTT
 * and rate samples feed the estimators, and only packet pairs and drains wait
 * for Open.  At 1e-2 random loss a flow of 250 segments loses 2.5 a round and
 * the kernel leaves Recovery and enters it again on the same ACK, so a window
 * that grows only in Open hardly grows.  A congestive Recovery holds (the
 * loss says the storage is full); so do the drain and the competitive mode,
 * whose windows follow their own rules.
 */
CCL_CORE bool ccpd_law_in_recovery(const struct ccpd *ca)
{
	return ca->last_loss == CCPD_LOSS_RANDOM &&
	       (ca->phase == CCL_PHASE_CA || ca->phase == CCL_PHASE_SS) &&
	       !(ca->sh & (CCPD_SH_DRAINING | CCPD_SH_COMP));
}

/*
 * pkts_acked, on every ACK just before cong_control: the RTT estimator
 * and the slow-start exit, in every state but Loss.  Recovery's samples
 * count too (the kernel takes none from retransmitted segments): the law
 * runs through a random Recovery (ccpd_law_in_recovery), and the loss tests
 * of the next Recovery read the queue of now.  Without them the smoothed RTT
 * of the last congestive loss would stand through Recoveries entered again
 * on leaving the last, each judged congestive on that stale queue, and
 * under heavy random loss the window would decay over an empty queue.  A
 * hook of its own so
 * that the verifier walks it apart from cong_control.
 */
CCL_CORE void ccpd_on_rtt(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 ca_state,
			  s32 rtt_us, u32 delivered_out, u32 now_us, u32 snd_cwnd)
{
	u32 m, n, gap, elapsed, round_min = CCL_U32_MAX;
	bool train, queue;

	if (ca_state == CCL_CA_LOSS)
		return;
	ccpd_rtt_sample(ca, rtt_us, delivered_out);
	/*
	 * m >= rtt_floor (250 us): on a path of microseconds the RTT is the
	 * hosts' (ACK and softirq batching, wakeups), and it grows with the
	 * window while the rate grows too.  With m at its smallest sample (a
	 * few us on a veth pair) every packet past the first two reads as
	 * queue: a window of a few segments, a fraction of cubic's rate, and
	 * one wakeup of the receiver per packet (docs/ccpd.md, "Paths of
	 * microseconds").  Paths of a millisecond and more keep their own m.
	 */
	if (ca->rtt_min_us < p->rtt_floor_us)
		ca->rtt_min_us = p->rtt_floor_us;
	if ((ca->sh & CCPD_SH_DRAINING) && rtt_us > 0 && (u32)rtt_us < ca->drain_min_us)
		ca->drain_min_us = (u32)rtt_us;
	if (ca->phase == CCL_PHASE_SS) {
		gap = now_us - ca->ss_last_ack_us;
		if (gap > CCPD_TRAIN_GAP_US) {
			/* rounded up, saturating: a gap never counts as train time */
			gap = (gap >> CCPD_GAP_SHIFT) + 1;
			gap += ca->ss_round_gap;
			ca->ss_round_gap = gap < CCPD_GAP_FULL ? gap : CCPD_GAP_FULL;
		}
		ca->ss_last_ack_us = now_us;
	}
	n = ca->round_samples;
	if (rtt_us > 0) {
		if ((u32)rtt_us < ca->round_min_us)
			ca->round_min_us = (u32)rtt_us;
		if (n < CCPD_SS_EXIT_SAMPLES) {
			ca->round_samples++;
			if (n + 1 == CCPD_SS_EXIT_SAMPLES)
				round_min = ca->round_min_us;
		}
	}
	if (ca->phase != CCL_PHASE_SS || !p->ss_exit || snd_cwnd < CCPD_SS_EXIT_MIN_CWND)
		return;
	m = ca->rtt_min_us != CCL_U32_MAX ? ca->rtt_min_us : 0;
	elapsed = now_us - ca->round_start_us;
	gap = (u32)ca->ss_round_gap << CCPD_GAP_SHIFT;
	/* paced at 2x, a round's ACKs come spread over srtt / 2 whatever the
	 * window: the train must then last m (half of it, as HyStart counts,
	 * ends a paced slow start far below the pipe) */
	train = m && ca->ss_round_gap != CCPD_GAP_FULL && elapsed > gap &&
		elapsed - gap >= (p->pace ? m : m / 2);
	queue = round_min != CCL_U32_MAX && ccpd_ss_queue_seen(m, round_min, snd_cwnd);
	if (queue && p->ss_exit == 2) {
		ca->ss_css = 1; /* judged at the round's end: ccpd_ss_confirm */
		queue = false;
	}
	if (train || queue || (p->pace && ccpd_ss_paced_queue(ca, m, rtt_us, now_us)))
		ccpd_ss_end(ca, snd_cwnd);
}

/*
 * A queue the loss tests can trust: the smoothed RTT at least
 * clamp(m / 16, rtt_floor, CCPD_SS_EXIT_MAX_US) above the base RTT.  Under
 * it a loss finds the bottleneck nearly empty, so it is random whatever the
 * other tests say: after a congestive hold relearns rtt_max to the RTT of the
 * moment (bmax_on_loss), rtt_max - m is noise, and "s >= m + 3/4 (rtt_max -
 * m)" holds for every loss, and under heavy random loss every Recovery would
 * be judged congestive, the window a fraction of the pipe.  m / 16 is below the
 * queue of a BDP/8 buffer on every path and above the burst that leaving a
 * Recovery sends into an empty queue.
 */
CCL_CORE u32 ccpd_queue_thr_us(const struct ccpd *ca, const struct ccl_ccpd_params *p)
{
	u32 thr = ca->rtt_min_us / 16;

	thr = thr < p->rtt_floor_us ? p->rtt_floor_us : thr;
	return thr > CCPD_SS_EXIT_MAX_US ? CCPD_SS_EXIT_MAX_US : thr;
}

CCL_CORE bool ccpd_loss_queue_seen(const struct ccpd *ca, const struct ccl_ccpd_params *p)
{
	u32 m = ca->rtt_min_us;

	if (m == CCL_U32_MAX)
		return true;
	return (u64)ccpd_rtts(ca) >= (u64)m + ccpd_queue_thr_us(ca, p);
}

/*
 * pkts_acked in Recovery: a burst of losses is an overflow, not random loss
 * (1e-4 drops 0.16 packets per round at 1,583 in flight), so the hold of a
 * Recovery classified random turns congestive once it has counted
 * CCPD_BURST_LOSSES with a queue at the bottleneck, or an eighth of the
 * window without one (a buffer too small for the queue test: random loss
 * that heavy would be 12 %).  RTT noise and stalls lift rtt_max, so the
 * delay test of ccpd_on_ssthresh can miss a full buffer; without this a
 * window above the storage would be held for every Recovery, each entered
 * on leaving the last.  The queue test is the loss tests' (ccpd_loss_queue_seen)
 * in congestion avoidance, and the slow-start exit's on the round's smallest
 * RTT in slow start, whose own bursts queue W / 2 packets for a moment, a
 * queue the smoothed RTT would take for congestion.
 * cong_control counts the losses; the check runs here, one ACK later, because
 * in cong_control it takes the verifier past its 1M-instruction limit.
 */
CCL_CORE void ccpd_on_recovery_ack(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 cwnd_clamp)
{
	u32 m = ca->rtt_min_us, rmin, h;
	bool queue;

	if (ca->last_loss != CCPD_LOSS_RANDOM || ca->recov_losses < CCPD_BURST_LOSSES)
		return;
	if (ca->phase == CCL_PHASE_SS) {
		rmin = ca->round_min_us != CCL_U32_MAX ? ca->round_min_us : ccpd_rtts(ca);
		queue = m == CCL_U32_MAX || ccpd_ss_queue_seen(m, rmin, CCPD_SS_EXIT_MIN_CWND);
	} else {
		queue = ccpd_loss_queue_seen(ca, p);
	}
	if (!queue && ca->recov_losses < ca->cwnd_hold / 8)
		return;
	h = ccpd_cong_hold(ca, p, ccpd_capacity(ca), ca->cwnd_hold, cwnd_clamp);
	ca->cwnd_hold = ccpd_hold_floor(p, h);
	ca->w_q10 = ca->cwnd_hold << 10;
	ca->last_loss = CCPD_LOSS_CONGESTIVE;
	/* a slow-start overshoot the delay test missed: slow start ends here */
	if (ca->phase == CCL_PHASE_SS)
		ccpd_ss_end(ca, ca->cwnd_hold);
}

/*
 * A capacity fall, at a round start in CA (Open, Disorder, CWR, Recovery),
 * or in a held Recovery of the slow start back after an RTO:
 * a cellular link whose rate steps down 4-10x and stays there for seconds
 * (docs/ccpd.md, "A capacity fall").  fb, the delivery-rate maximum over
 * 10-20 rounds, and C, the pairs' median (1/16 of the way a sample), read
 * the old rate for seconds after the link slowed, and every estimate is
 * made from them: Little's bound n / fb on each RTT sample
 * (ccpd_rtt_sample) clips the new queue to a fraction of its delay (on a
 * 24-to-6 Mbit/s step the law read 50 ms of queue where the kernel's srtt
 * read 120), C (s - m) and C (rtt_max - m) scale the queue and the buffer
 * by the old rate, and the congestive hold P_fb + Kp (w - P_fb) / (1 + 2 Kp)
 * sits above the storage, so a held Recovery overflows the buffer round
 * after round.  A round whose every RTT sample stood over a queue (its
 * smallest above m by the loss tests' bound) kept the bottleneck busy, so
 * what the flow delivered in it is the link's rate now.  Beside another
 * sender it is the flow's part of it, and a part that falls (a cubic
 * growing into the queue) is no fall of the link: taken for one, the flow
 * gave a cubic 99.6 % of the link.  So with share C waits for the evidence
 * of the drains (ccpd_drain): the last one found the queue empty while the
 * path's ccpd flows carried at least 3/4 of C, and the flow is not
 * competing.  A held Recovery needs none: its hold is made from the flow's
 * own delivery rate, whoever else is there, and one that overflows the
 * buffer round after round never reaches Open, where drains run (a 5G log
 * falling from 800 to 5-40 Mbit/s held 1,200-1,400 segments in Recovery for
 * 25 s, most of it in the slow start after an RTO, whose target is then as
 * stale as the hold and comes down with it).
 * Two such rounds in a row, each with
 *   r = delivered / round duration,  r < fb / 2:  fb = r,
 *   share, alone: C = max(r, C / 4)  (a flow that reads only its part of a
 *          shared link loses at most three quarters of C, which its pairs
 *          win back at 1/16 a round; the path's C follows, ccpd_path_sync),
 * and a held Recovery's hold is made again from them (ccpd_cong_hold).  A
 * host stall reads as one such round, the ACK burst after it as a fast one
 * (the closed-loop model's 20-ms stall on a 10-ms path lifted B from 38 to
 * 83 packets when one round was taken for a fall); a drain cuts the rate on
 * purpose and is skipped.
 * dlv: segments delivered (SACKed included) in the round that ended,
 * dt_us its duration, a the ACK that ended it.  A global subprogram: it
 * checks its pointers.
 * Returns 1 when it read a fall.
 */
CCL_CORE_GLOBAL int ccpd_rate_fall(struct ccpd *ca, const struct ccl_ccpd_params *p,
				   const struct ccpd_ack *a, u32 dlv, u32 dt_us)
{
	u32 fb, m, r, h;
	bool held, alone, second;

	if (!ca || !p || !a)
		return 0;
	fb = ccpd_fb(ca);
	m = ca->rtt_min_us;
	held = a->ca_state == CCL_CA_RECOVERY && !ccpd_law_in_recovery(ca);
	alone = !(ca->sh & CCPD_SH_ON) || (ca->sh_alone && !(ca->sh & CCPD_SH_COMP));
	if ((ca->phase != CCL_PHASE_CA && !(ca->phase == CCL_PHASE_SS_RTO && held)) ||
	    a->ca_state == CCL_CA_LOSS || !fb || !dt_us || m == CCL_U32_MAX ||
	    ccpd_rate_windowed(ca) || (ca->sh & CCPD_SH_DRAINING) || (!alone && !held))
		return 0;
	if (ca->round_min_us == CCL_U32_MAX ||
	    (u64)ca->round_min_us < (u64)m + ccpd_queue_thr_us(ca, p))
		return 0;
	r = ccl_sat32((u64)dlv * CCL_USEC_PER_SEC / dt_us);
	if ((u64)r * 2 >= fb)
		return 0;
	/* the second such round in a row: a stall's round is followed by its
	 * ACK burst */
	second = ca->fall_round == (u16)ca->round.cnt;
	ca->fall_round = (u16)(ca->round.cnt + 1);
	if (!second)
		return 0;
	r = r ? r : 1;
	ca->fb_cur = r;
	ca->fb_prev = r;
	ca->fb_epoch_round = (u8)ca->round.cnt;
	if ((ca->sh & CCPD_SH_ON) && alone) {
		ca->cap_sps = ca->cap_sps / 4 > r ? ca->cap_sps / 4 : r;
		ca->sh |= CCPD_SH_PATH; /* tell the path, Recovery or not */
	}
	if (held) {
		h = ccpd_cong_hold(ca, p, ccpd_capacity(ca), ca->cwnd_hold, a->cwnd_clamp);
		ca->cwnd_hold = ccpd_hold_floor(p, h);
		ca->w_q10 = ca->cwnd_hold << 10;
		/* after an RTO: the window slow start returns to is as stale */
		if (ca->phase == CCL_PHASE_SS_RTO && ca->rto_ss_target > ca->cwnd_hold)
			ca->rto_ss_target = ca->cwnd_hold;
	}
	return 1;
}

/*
 * The state's share layout follows the tunable: the unions hold CapProbe's
 * epoch or the drain's bookkeeping, so a change of `share` starts both from
 * nothing.
 */
CCL_CORE void ccpd_share_sync(struct ccpd *ca, const struct ccl_ccpd_params *p)
{
	if (!!(ca->sh & CCPD_SH_ON) == !!p->share)
		return;
	if (ca->sh & CCPD_SH_DRAINING)
		ca->w_q10 = (u32)ccl_min64((u64)ca->drain_w_saved << 10, CCL_U32_MAX);
	ca->sh = p->share ? CCPD_SH_ON : 0;
	ca->cap_sps = 0;
	ca->cp_age = 0;
	ca->cp_best_dsum_us = CCL_U32_MAX;
	ca->cp_best_c_sps = 0;
	ca->cp_epoch_round = (u8)ca->round.cnt;
}

/*
 * Competing: the window w_q10 carries at least half the link over the
 * smoothed RTT s_us, the fair window of two flows: below it the flow grows
 * its full step, from it one segment a round.  Competing, c_sps is the pair
 * samples' upper quartile (ccpd_median_step), which reads about 1/8 above
 * the link at equal shares, so half the link is w >= 7/16 C s.  Against more
 * than one competitor the flow aims at half the link, more than its share:
 * the step assumes the common case of one.
 */
CCL_CORE int ccpd_has_half(u32 w_q10, u32 c_sps, u32 s_us)
{
	return (u64)w_q10 >= ccl_segs_q10(c_sps, s_us) * 7 / 16;
}

/* share: the flow is in a drain that ends at this ACK or has ended (the
 * ACK on which ccpd_drain judges it, and reads a->path_sps). */
CCL_CORE bool ccpd_drain_ends(const struct ccpd *ca, u32 now_us)
{
	return (ca->sh & CCPD_SH_DRAINING) && (s32)(now_us - ca->drain_end_us) >= 0;
}

/*
 * share: a synchronised drain.  Every flow's clock is the host's, so every
 * ccpd flow on the host starts one at the first ACK of each drain_ms slot.
 * For max(200 ms, 2 s) the window is the flow's pipe share w m / s: the flow
 * keeps its rate (w m / s over m is w / s) and takes its packets out of the
 * queue.  A competing flow drains to 3/4 of it: a flow that came to a
 * standing queue reads m too large by it, and its pipe share with it:
 * flows started together would keep their queue through every drain and
 * compete with each other for good.  3/4 empties the queue for an m up to
 * 4/3 of the path's.  (A flow alone drains to its whole pipe share: at 3/4
 * it would lose a quarter of its rate for two rounds every drain, and the
 * delivery rate the storage estimate reads with it.)  With the queue empty
 *   - a flow that came to a standing queue learns the path's rtt_min (its
 *     own minimum included the earlier flows' queue, so it read its own
 *     queue d = w (s - m) / s too small and took more than its share);
 *   - a queue that stays is another sender's, one that does not back off from
 *     delay (cubic, reno): the flow competes (below) until a drain sees the
 *     queue empty again.  Unless it grew: when even the drain's smallest
 *     RTT sample is above the smoothed RTT at its start by an eighth (the
 *     larger of ccpd's and the kernel's: ccpd's is held to Little's bound n / fb,
 *     which reads under the samples while the window falls and fb lags
 *     it, and a flow that a cubic pushed down to 44 segments took the
 *     cubic's steady queue for a slower link at every drain), the link's
 *     capacity fell during the drain (a cellular link's outage: the LTE
 *     trace raised the RTT from 53 to 282 ms in one), and the queue is the
 *     flow's own earlier rate.  A competitor's queue does not grow through
 *     a drain: the flow takes its own packets out of it, and reno or cubic
 *     add a few segments in its 2 RTTs.  Nor is a queue of a few packets
 *     (CCPD_COMP_ENTER_PKTS at the flow's rate fb, at least C / 4): the
 *     alternating link's 6-Mbit/s phase shows 4 ms over the m of its
 *     24-Mbit/s one, a packet's time and a delayed ACK's, where a
 *     loss-based flow keeps tens.
 * A drain's empty queue ends competing only when the path's ccpd flows
 * carried at least 3/4 of C before it (a->path_sps, the rates the flows
 * reported at the drain's start, summed per path by bpf/ccpd.bpf.c; at
 * least the flow's own): then no other sender shares the link.
 * Otherwise the drain fell in a competitor's trough.  A cubic just after
 * its loss (0.7 of half the link) with this flow at 3/4 of its pipe share
 * fills less than the pipe, and a reno at BDP/2 leaves the queue under the
 * exit bound in most drains; a flow that left would back off from the
 * queue the competitor rebuilds until the next slot (docs/ccpd.md,
 * "Sharing a bottleneck").
 * Returns the window to hold (segments) while draining, or 0.
 */
CCL_CORE_GLOBAL u32 ccpd_drain(struct ccpd *ca, const struct ccl_ccpd_params *p,
			       const struct ccpd_ack *a, u32 c_sps, struct ccpd_out *o)
{
	u32 slot, m, s, w, qmax, dq, enter, leave, rate;
	u64 mine, path;
	bool grew, kept, empty;

	/* a global subprogram (inlined, cong_control goes past the
	 * verifier's 1M-instruction limit): it checks its pointers */
	if (!ca || !p || !a || !o || !p->drain_ms)
		return 0;
	slot = a->now_us / (p->drain_ms * 1000);
	m = ca->rtt_min_us;
	s = ccpd_rtts(ca);
	w = ca->w_q10 >> 10;

	if (!(ca->sh & CCPD_SH_SLOT)) {
		ca->drain_slot = (u8)slot;
		ca->sh |= CCPD_SH_SLOT;
		return 0;
	}
	if (!(ca->sh & CCPD_SH_DRAINING)) {
		if ((u8)slot == ca->drain_slot || a->ca_state != CCL_CA_OPEN || m == CCL_U32_MAX)
			return 0;
		ca->drain_slot = (u8)slot;
		ca->sh |= CCPD_SH_DRAINING;
		ca->drain_w_saved = w;
		ca->drain_min_us = CCL_U32_MAX;
		/* the drain's samples are raw: so is what they are held to */
		ca->drain_s_us = s > a->srtt_us ? s : a->srtt_us;
		ca->e_valid = 0;
		ca->drain_end_us = a->now_us + (u32)ccl_max64(CCPD_DRAIN_MIN_US, 2 * (u64)s);
		o->drain_sps = ccl_sat32(s ? (u64)w * CCL_USEC_PER_SEC / s : 0);
		o->drain_slot = slot;
		w = s > m ? (u32)((u64)w * m / s) : w;
		if (ca->sh & CCPD_SH_COMP)
			w = (u32)((u64)w * CCPD_DRAIN_Q10 >> 10);
		w = w > p->cwnd_min ? w : p->cwnd_min;
		ca->w_q10 = w << 10;
		return w;
	}
	if (!ccpd_drain_ends(ca, a->now_us))
		return w > p->cwnd_min ? w : p->cwnd_min;
	/* The drain ends: did the queue empty? */
	ca->sh &= ~CCPD_SH_DRAINING;
	qmax = ccpd_qmax_us(ca);
	if (ca->drain_min_us != CCL_U32_MAX) {
		dq = ca->drain_min_us > m ? ca->drain_min_us - m : 0;
		enter = qmax / 4 > CCPD_COMP_ENTER_US ? qmax / 4 : CCPD_COMP_ENTER_US;
		/* and more than CCPD_COMP_ENTER_PKTS packets at the flow's own
		 * rate: on a link slowed 4x a packet's time and a delayed ACK
		 * stand over the m learnt at the fast rate.  At least C / 4: a
		 * flow a cubic squeezed to 2 segments delivers a trickle, and
		 * 4 packets of it would be 150 ms. */
		rate = (u32)ccl_max64(ccpd_fb(ca), c_sps / 4);
		if (rate)
			enter = (u32)ccl_max64(enter,
					       (u64)CCPD_COMP_ENTER_PKTS * CCL_USEC_PER_SEC / rate);
		leave = ccpd_comp_exit_us(ca);
		/* (the drain took s down: over rtt_max the flow's own rate
		 * errs low, towards competing) */
		mine = ca->rtt_max_us ? (u64)ca->drain_w_saved * CCL_USEC_PER_SEC / ca->rtt_max_us :
					0;
		path = ccl_max64(a->path_sps, mine);
		/* the queue grew through the drain: the link slowed (below);
		 * by more than an eighth, a sample's noise (at a window of 2
		 * the receiver's delayed ACK is in every sample) */
		grew = ca->drain_min_us > ca->drain_s_us + ca->drain_s_us / 8;
		kept = dq > enter && !grew;
		empty = dq <= leave && (path << 10) >= (u64)c_sps * CCPD_COMP_EXIT_Q10;
		if (kept && !(ca->sh & CCPD_SH_COMP))
			ca->sh = (ca->sh | CCPD_SH_COMP) & ~CCPD_SH_CLOSS;
		else if (empty)
			ca->sh &= ~CCPD_SH_COMP;
		/* the evidence ccpd_rate_fall needs that no other sender is
		 * there, and its absence */
		if (empty)
			ca->sh_alone = 1;
		else if (kept)
			ca->sh_alone = 0;
	}
	/* Competing, the window before the drain comes back (AIMD would take
	 * many rounds to regrow it); otherwise the law regrows it from the pipe
	 * share, gamma Kp B a round into the emptied queue. */
	if (ca->sh & CCPD_SH_COMP)
		ca->w_q10 = (u32)ccl_min64((u64)ccl_max64(ca->drain_w_saved, w) << 10, CCL_U32_MAX);
	ca->e_valid = 0;
	return 0;
}

/* A path's shared estimates: ccpd_paths' value without its time. */
struct ccpd_path_est {
	u32 qmax_us; /* buffer delay, rtt_max - rtt_min, us (0 = none) */
	u32 m_us;    /* base RTT, the smallest rtt_min of its flows, us (0 = none) */
	u32 c_sps;   /* capacity, a flow's pair median, segments/s (0 = none) */
};

/*
 * share: the path's buffer delay and base RTT, shared by the ccpd flows to
 * one destination (bpf/ccpd.bpf.c keeps them per network namespace and
 * destination address, as the kernel's tcp_metrics keep a path's RTT).
 *
 * B is the buffer, a property of the path, but each flow learns it from its
 * own history: from its slow start's overflow, or never, when a late
 * joiner's slow start ends at the queue the others keep, and each flow's own
 * queue at equilibrium (ccpd_law_l1) follows its own B.  So a flow takes the
 * path's value when it is larger than its own, and gives its own when it is
 * at least the path's, or when a congestive loss re-learnt it (the loss is
 * the buffer's overflow, fresher than any slow start).
 *
 * m is the path's too: a flow whose first RTT samples came through a queue
 * other flows keep reads m too large by that queue, and its own queue
 * d = w (s - m) / s too small, so it takes more than its share.  A drain
 * corrects m only by what the flows' pipe shares (also read with their m)
 * leave out of the queue, a few ms a drain, while the flows that have the
 * path's m sit at a couple of segments.  A flow takes the path's m when it
 * is smaller than its own by at most the buffer's delay (the most a queue
 * can add; a larger gap is another path to the same address) and gives its
 * own when it is smaller.
 *
 * C is the path's too.  A flow learns it from its pairs, and a pair needs
 * the window to free two units at one ACK: the law moves the window once a
 * round, so a window that stands still sends none.  A flow whose slow start
 * ended on another flow's queue (the longer flow of two with different
 * RTTs) has C at about its own rate; P = C m and B = C (rtt_max - m) are as
 * small, the law stands at a small window, and its pairs, which need the
 * window to move, barely move C.  A flow takes the path's C when its own is under half of it,
 * and otherwise moves its own an eighth of the way to it each round: every
 * flow's median is a noisy reading of one link (a late flow's can read
 * half the first flow's for seconds), and the law's rates converge when C is
 * common (item 1 of docs/ccpd.md's "Sharing a bottleneck").  It gives its
 * own when it differs from the path's by more than an eighth (a map write
 * per round each would be a lot at microsecond rounds).  Its own pairs go
 * on from there.
 *
 * Once a round in CA: cong_control sets CCPD_SH_PATH at a round start, and
 * pkts_acked, on the next ACK, reads the path (the map's key and value did
 * not fit cong_control's stack).  pe holds the path's values on entry and
 * the values to write on return; returns true to write them.
 */
CCL_CORE bool ccpd_path_sync(struct ccpd *ca, struct ccpd_path_est *pe)
{
	u32 m = ca->rtt_min_us, q, pq = pe->qmax_us, pm = pe->m_us;
	bool give, fell;

	ca->sh &= ~CCPD_SH_PATH;
	if (!(ca->sh & CCPD_SH_ON) || m == CCL_U32_MAX || ca->phase != CCL_PHASE_CA)
		return false;
	q = ccpd_qmax_us(ca);
	if (pm && pm < m && m - pm <= (q > pq ? q : pq)) {
		/* rtt_max stays: the buffer's delay grows by what m falls */
		ca->rtt_min_us = pm;
		m = pm;
		q = ccpd_qmax_us(ca);
	}
	give = !pm || m < pm;
	pe->m_us = give ? m : pm;
	/* a fall read this round (ccpd_rate_fall): the flow's C is the path's
	 * news, not a late joiner's small reading */
	fell = !ccpd_rate_windowed(ca) && ca->fall_round == (u16)(ca->round.cnt + 1);
	if (pe->c_sps && !fell) {
		u32 c = ca->cap_sps, pc = pe->c_sps, r = c > ccpd_fb(ca) ? c : ccpd_fb(ca);

		/*
		 * Under half: the path's.  The buffer's delay the flow learnt
		 * came at its own rate r, and B = C (rtt_max - m) would read it
		 * at pc: a flow born in a capacity dip (LTE, 23 s into the web
		 * mix: srtt 617-731 ms at 11-24 segments/s, the first RTTs a
		 * flow has) saw 0.7-0.9 s of delay in a queue of 8-16 packets,
		 * and at the path's 1,228 segments/s that is 900-1,100 segments
		 * on a 223-packet buffer; shared, every later flow filled the
		 * buffer with it.  So the delay is kept as the same packets at
		 * the path's rate, q r / pc.  A flow whose small C read a real
		 * queue (a slow start that ended on another flow's) takes the
		 * path's delay back below, as a larger one.
		 */
		if (c < pc / 2) {
			if (r && r < pc && q)
				ca->rtt_max_us = m + (u32)((u64)q * r / pc);
			q = ccpd_qmax_us(ca);
			ca->cap_sps = pc;
		} else {
			/* otherwise an eighth of the way to it */
			ca->cap_sps = c > pc ? c - (c - pc) / 8 : c + (pc - c) / 8;
		}
	}
	if (ca->cap_sps &&
	    (ca->cap_sps > pe->c_sps + pe->c_sps / 8 || ca->cap_sps < pe->c_sps - pe->c_sps / 8)) {
		pe->c_sps = ca->cap_sps;
		give = true;
	}
	if (ca->sh & CCPD_SH_QLOSS) {
		ca->sh &= ~CCPD_SH_QLOSS;
		pe->qmax_us = q;
		return true;
	}
	if (pq > q) {
		ca->rtt_max_us = (u32)ccl_min64((u64)m + pq, CCL_U32_MAX);
		return give;
	}
	pe->qmax_us = q;
	return true;
}

/* ---------------------------------------------------------------------------
 * cong_control, every ACK: one mode per ACK, chosen in ccpd_mode_of.
 *
 *   mode      runs when                              window
 *   HOLD      Recovery after a congestive loss       held (ccpd_on_ssthresh's hold)
 *   SS_RTO    the kernel's Loss, or phase SS_RTO      slow start to the last law window
 *   SS        phase SS                               slow start (ss_exit's tests)
 *   RENO      phase CA, no C or m yet                Reno's AI, by the caller
 *   DRAIN     share, L1, a drain under way           the drain's window (ccpd_drain)
 *   COMP      share, L1, competing (CCPD_SH_COMP)     AIMD
 *   LAW       phase CA otherwise                     L0 per ACK or L1 per round
 *
 * HOLD and SS_RTO skip the estimators; every other mode runs them first,
 * and a round's end there may end slow start (ccpd_ss_confirm), so the
 * rest is chosen after them.  The phases and what moves between them are
 * the diagram at the top of bpf/ccpd.bpf.c; the drains and the competing
 * spells start and end in ccpd_drain.
 * ------------------------------------------------------------------------- */

enum ccpd_mode {
	CCPD_MODE_RUN = 0, /* before the estimators: one of the modes below HOLD */
	CCPD_MODE_HOLD = 1,
	CCPD_MODE_SS_RTO = 2,
	CCPD_MODE_SS = 3,
	CCPD_MODE_RENO = 4,
	CCPD_MODE_DRAIN = 5,
	CCPD_MODE_COMP = 6,
	CCPD_MODE_LAW = 7,
};

/*
 * The mode of this ACK: the one place that reads the phase, the kernel's
 * CA state and the share bits together.  Before the estimators
 * (!estimated): HOLD, SS_RTO or RUN.  After them: SS, RENO, DRAIN, COMP or
 * LAW; ccpd_drain, which starts and ends the drains, answers DRAIN and
 * leaves the drain's window in *drain_cw.
 */
CCL_CORE u32 ccpd_mode_of(struct ccpd *ca, const struct ccl_ccpd_params *p,
			  const struct ccpd_ack *a, struct ccpd_out *o, bool estimated,
			  u32 *drain_cw)
{
	bool l1_share = p->share && p->mode != 0;

	if (!estimated) {
		if (a->ca_state == CCL_CA_RECOVERY && !ccpd_law_in_recovery(ca))
			return CCPD_MODE_HOLD;
		if (a->ca_state == CCL_CA_LOSS || ca->phase == CCL_PHASE_SS_RTO)
			return CCPD_MODE_SS_RTO;
		return CCPD_MODE_RUN;
	}
	if (ca->phase == CCL_PHASE_SS)
		return CCPD_MODE_SS;
	if (!o->c_sps || o->l.rtt_min_us == 0)
		return CCPD_MODE_RENO;
	if (l1_share && a->ca_state != CCL_CA_RECOVERY &&
	    (*drain_cw = ccpd_drain(ca, p, a, o->c_sps, o)))
		return CCPD_MODE_DRAIN;
	if (l1_share && (ca->sh & CCPD_SH_COMP))
		return CCPD_MODE_COMP;
	return CCPD_MODE_LAW;
}

/* The round tracker, by delivered count (ccl_core.h): the length of the
 * round that ended on this ACK, us (0: none ended). */
CCL_CORE u32 ccpd_ack_round(struct ccpd *ca, const struct ccl_ccpd_params *p,
			    const struct ccpd_ack *a, struct ccpd_out *o)
{
	u32 dt_round, mark = ca->round.end_mark;

	if (!a->has_prior ||
	    !ccl_round_on_delivery(&ca->round, a->prior_delivered, a->tp_delivered))
		return 0;
	dt_round = a->now_us - ca->round_start_us;
	ca->round_start_us = a->now_us;
	o->round_start = 1;
	o->ev |= CCPD_EV_ROUND;
	if (ccpd_rate_fall(ca, p, a, a->tp_delivered - mark, dt_round))
		o->ev |= CCPD_EV_FALL;
	return dt_round;
}

/* HOLD: fast recovery after a congestive loss holds the window. */
CCL_CORE void ccpd_ack_hold(struct ccpd *ca, const struct ccl_ccpd_params *p, struct ccpd_out *o)
{
	/* each held round's smallest RTT for ccpd_rate_fall */
	if (o->round_start && ca->phase != CCL_PHASE_SS)
		ca->round_min_us = CCL_U32_MAX;
	o->snd_cwnd = ca->cwnd_hold > p->cwnd_min ? ca->cwnd_hold : p->cwnd_min;
	o->c_sps = ccpd_capacity(ca);
}

/* SS_RTO: after an RTO, slow start back to the last CCPD window. */
CCL_CORE void ccpd_ack_ss_rto(struct ccpd *ca, const struct ccl_ccpd_params *p,
			      const struct ccpd_ack *a, struct ccpd_out *o)
{
	u32 target = ca->rto_ss_target > p->cwnd_min ? ca->rto_ss_target : p->cwnd_min;
	u32 cw = (u32)ccl_min64((u64)a->snd_cwnd + a->acked, target);

	cw = cw < a->cwnd_clamp ? cw : a->cwnd_clamp;
	o->snd_cwnd = cw > p->cwnd_min ? cw : p->cwnd_min;
	if (o->snd_cwnd >= target && a->ca_state == CCL_CA_OPEN)
		ccpd_ss_end(ca, o->snd_cwnd);
	o->c_sps = ccpd_capacity(ca);
}

/*
 * The estimators (Open, Disorder, CWR, a random Recovery; the RTT
 * estimator ran in ccpd_on_rtt): at a round's end the slow-start exit's
 * rounds or the noise floor, then the delivery rate, the packet pairs, the
 * filters' epochs and C.  Returns the ended round's smallest RTT sample
 * (CCL_U32_MAX: no round ended).
 *
 * A global subprogram (checked once by the verifier, not once per path
 * of cong_control: docs/testing.md, "Other kernels"): it checks its
 * pointers.
 */
CCL_CORE_GLOBAL u32 ccpd_ack_estimators(struct ccpd *ca, const struct ccl_ccpd_params *p,
					const struct ccpd_ack *a, struct ccpd_out *o)
{
	u32 prev_min = CCL_U32_MAX;

	if (!ca || !p || !a || !o)
		return CCL_U32_MAX;
	if (o->round_start) {
		if ((ca->sh & CCPD_SH_ON) && ca->phase == CCL_PHASE_CA)
			ca->sh |= CCPD_SH_PATH;
		prev_min = ca->round_min_us;
		if (ca->phase == CCL_PHASE_SS) {
			ccpd_ss_round(ca, prev_min);
			if (ccpd_ss_confirm(ca, prev_min))
				ccpd_ss_end(ca, a->snd_cwnd);
		} else if (a->ca_state == CCL_CA_OPEN)
			ccpd_noise_round(ca, p, prev_min, a->snd_cwnd, ccpd_capacity(ca));
		ca->round_min_us = CCL_U32_MAX;
		ca->round_samples = 0;
		if (ca->phase == CCL_PHASE_SS)
			ca->ss_round_gap = 0;
	}
	ccpd_delivery_rate(ca, a);
	if (a->ca_state != CCL_CA_RECOVERY) /* recov_losses shares pair_seq */
		o->ev |= ccpd_pair_ack(ca, p, a);
	if (o->round_start)
		ccpd_epochs(ca, p);
	o->c_sps = ccpd_capacity(ca);
	/*
	 * A window-limited flow in a random Recovery with no queue at the
	 * bottleneck has not found the link: C is at least 1.25x what it
	 * delivers, as without share.  Pairs wait for Open, and under heavy
	 * random loss the flow is rarely there: C would stay at the flow's own
	 * rate, the clamp P + B at its window, and the window would grow only
	 * by the buffer's part of the pipe per round.
	 */
	if (a->ca_state == CCL_CA_RECOVERY && a->cwnd_limited && !ccpd_loss_queue_seen(ca, p))
		o->c_sps = (u32)ccl_max64(o->c_sps, (u64)ccpd_fb(ca) * CCPD_CAP_OVER_FB_Q10 >> 10);
	return prev_min;
}

/*
 * What the window laws read this ACK: m, the queue's RTT s and the
 * estimates P, B and x (o->l).
 *
 * A global subprogram (checked once by the verifier, not once per path
 * of cong_control: docs/testing.md, "Other kernels"): it checks its
 * pointers, and returns 1.
 */
CCL_CORE_GLOBAL int ccpd_law_inputs(const struct ccpd *ca, const struct ccl_ccpd_params *p,
				    const struct ccpd_ack *a, struct ccpd_out *o, u32 prev_min)
{
	struct ccpd_law *l;
	u32 qn;

	if (!ca || !p || !a || !o)
		return 0;
	l = &o->l;
	qn = p->q_noise_us;
	l->rtt_min_us = ccpd_law_m(ca);
	/*
	 * The queue the L1 law regulates, x = C (s - m) and d = w (s - m) / s,
	 * with s from ccpd_law_rtt (the smoothed RTT less its noise, up to
	 * q_noise).  The round's minimum alone (q_rtt = 1) hides a queue that
	 * swings within the round, and the flow overflows shallow buffers
	 * (docs/ccpd.md, "How ccload reads it").  The round minimum is known
	 * at a round start only, when the law runs.
	 */
	if (p->q_little) {
		u32 ex =
			ccpd_little_excess(ccpd_rtts(ca), l->rtt_min_us, a->in_flight, ccpd_fb(ca));

		qn = ex > qn ? ex : qn;
	}
	l->rtts_us =
		p->mode != 0 ? ccpd_law_rtt(ccpd_rtts(ca), prev_min, p->q_rtt, qn) : ccpd_rtts(ca);
	l->in_flight = a->in_flight;
	l->kp_q10 = p->kp_q10;
	l->cwnd_min = p->cwnd_min;
	ccpd_estimate(o->c_sps, l->rtt_min_us, ca->rtt_max_us, l->rtts_us, p->b_min, &l->est);
	return 1;
}

/* SS: slow start, estimators running; ends at the first loss or, with
 * ss_exit, in ccpd_on_rtt. */
CCL_CORE void ccpd_ack_ss(struct ccpd *ca, const struct ccl_ccpd_params *p,
			  const struct ccpd_ack *a, struct ccpd_out *o)
{
	u32 cw;

	if (a->cwnd_limited && a->ca_state != CCL_CA_RECOVERY && ca->ss_css) {
		/* a delay exit being confirmed: a quarter of slow start's
		 * growth (HyStart++'s CSS) on the kernel's window, the
		 * fraction of a segment kept in w_q10 */
		u64 wq = ((u64)a->snd_cwnd << 10) + (ca->w_q10 & 0x3ff) + ((u64)a->acked << 8);

		wq = ccl_min64(wq, ccl_min64((u64)a->cwnd_clamp << 10, CCL_U32_MAX));
		o->snd_cwnd = (u32)(wq >> 10);
		ca->w_q10 = (u32)wq;
		return;
	}
	if (a->cwnd_limited && a->ca_state != CCL_CA_RECOVERY) {
		cw = (u32)ccl_min64((u64)a->snd_cwnd + a->acked, a->cwnd_clamp);
		o->snd_cwnd = cw;
	} else if (a->cwnd_limited && !ccpd_loss_queue_seen(ca, p)) {
		/* a random Recovery: at most one doubling of the window held
		 * at its entry */
		cw = (u32)ccl_min64((u64)a->snd_cwnd + a->acked,
				    ccl_min64(2 * (u64)ca->cwnd_hold, a->cwnd_clamp));
		o->snd_cwnd = cw;
	}
	ca->w_q10 = (u32)ccl_min64((u64)o->snd_cwnd << 10, CCL_U32_MAX);
}

/* RENO: congestion avoidance before any capacity estimate: Reno's AI, run
 * by the caller. */
CCL_CORE void ccpd_ack_reno(struct ccpd *ca, const struct ccpd_ack *a, struct ccpd_out *o)
{
	o->reno_ai = a->cwnd_limited;
	ca->w_q10 = (u32)ccl_min64((u64)o->snd_cwnd << 10, CCL_U32_MAX);
}

/* DRAIN: the window ccpd_drain chose. */
CCL_CORE void ccpd_ack_drain(const struct ccl_ccpd_params *p, const struct ccpd_ack *a,
			     struct ccpd_out *o, u32 cw)
{
	o->law = CCPD_LAW_DRAIN;
	o->controlled = 1;
	o->l.cwnd_max = ccpd_cwnd_max(&o->l.est, p->cwnd_min, a->cwnd_clamp);
	o->snd_cwnd = cw;
}

/*
 * COMP: competing.  The queue stays when every ccpd flow drains, so a
 * loss-based flow keeps it, and a delay law would hand it the link.
 * AIMD: w grows by max(1, s / 10 ms) segments a round, and once a
 * congestive loss came in this competing spell (CCPD_SH_CLOSS) one
 * segment a round while it carries half the link or more
 * (ccpd_has_half) and the smoothed RTT shows a queue
 * (ccpd_loss_queue_seen); a congestive loss holds 0.7 W, cubic's
 * beta (ccpd_cong_hold).  Additive, so that competing ccpd flows
 * still converge.  A flow enters competing at a few segments, at
 * the drain that finds the competitor's queue, where one segment
 * a round takes seconds to a share and s / 10 ms a round (H-TCP's
 * scaling) a few rounds; s / 10 ms throughout would take more
 * than half the link from a cubic.  Until the first loss, C is no
 * guide: a flow at share x reads pairs split by (1 - x) / x of the
 * competitor's packets, so C reads near its own share.  With no
 * queue the competitor left, or no one fills the pipe: a drain
 * ends competing only once the path's flows carry 3/4 C, and a
 * flow left alone at a fraction of the link grew at s / 10 ms a
 * round until then (a cellular link's dip left one at 195 of
 * 600 segments for 5 s); with comp_fill a round with no queue
 * grows it by half, up to the pipe C m (docs/ccpd.md, "Sharing
 * a bottleneck", "Competing on an empty link").
 *
 * A global subprogram (checked once by the verifier, not once per path
 * of cong_control: docs/testing.md, "Other kernels"): it checks its
 * pointers, and returns 1.
 */
CCL_CORE_GLOBAL int ccpd_ack_comp(struct ccpd *ca, const struct ccl_ccpd_params *p,
				  const struct ccpd_ack *a, struct ccpd_out *o)
{
	struct ccpd_law *l;

	if (!ca || !p || !a || !o)
		return 0;
	l = &o->l;
	o->law = CCPD_LAW_COMP;
	o->controlled = 1;
	l->cwnd_max = ccpd_cwnd_max(&l->est, p->cwnd_min, a->cwnd_clamp);
	if (o->round_start && a->cwnd_limited) {
		u64 w = ca->w_q10, inc = ((u64)l->rtts_us << 10) / CCPD_COMP_GROW_US;

		if ((ca->sh & CCPD_SH_CLOSS) && ccpd_has_half(ca->w_q10, o->c_sps, l->rtts_us) &&
		    ccpd_loss_queue_seen(ca, p))
			inc = CCL_Q10;
		/* comp_fill: no queue (s within a drain's exit bound of m):
		 * no one keeps one now and the pipe has room, so half the
		 * window a round, up to the pipe C m */
		if (p->comp_fill && w < l->est.p_q10 &&
		    l->rtts_us <= l->rtt_min_us + ccpd_comp_exit_us(ca)) {
			u64 room = l->est.p_q10 - w;

			inc = ccl_max64(inc, ccl_min64(w / 2, room));
		}
		w += inc > CCL_Q10 ? inc : CCL_Q10;
		ca->w_q10 =
			ccpd_clamp_w_q10((s64)ccl_min64(w, CCL_U32_MAX), p->cwnd_min, l->cwnd_max);
	}
	o->snd_cwnd = ca->w_q10 >> 10;
	if (o->snd_cwnd < p->cwnd_min)
		o->snd_cwnd = p->cwnd_min;
	return 1;
}

/* LAW: the PD law, L0 (Eq. 3 literally, every ACK) or L1 (once a round). */
CCL_CORE void ccpd_ack_law(struct ccpd *ca, const struct ccl_ccpd_params *p,
			   const struct ccpd_ack *a, struct ccpd_out *o, u32 dt_round)
{
	struct ccpd_law *l = &o->l;

	o->controlled = 1;
	l->cwnd_max = ccpd_cwnd_max(&l->est, p->cwnd_min, a->cwnd_clamp);
	l->w_q10 = ca->w_q10;
	l->e_valid = ca->e_valid;
	l->e_prev_q10 = ca->law_e_prev_q10;
	l->dterm_in_q10 = ca->law_dterm_q10;
	if (o->round_start)
		o->g_q10 = ccpd_gain_q10(p->kd_ms, dt_round, p->g_max_q10);
	l->g_q10 = o->g_q10;

	if (p->mode == 0) {
		ccpd_law_l0(l, o->round_start);
		if (o->round_start) {
			ca->law_e_prev_q10 = l->e_q10;
			ca->e_valid = 1;
		}
		ca->law_dterm_q10 = l->dterm_q10;
		ca->w_q10 = l->w_out_q10;
	} else if (o->round_start) {
		l->share_gamma_q10 = p->share ? ccpd_gamma_of(p) : 0;
		l->gamma_q10 = ccpd_share_gamma_q10(ccpd_gamma_of(p), p->share, o->c_sps, l);
		l->probe_b_q10 = ccpd_probe_b_q10(p, ca->last_loss);
		l->cwnd_clamp = a->cwnd_clamp;
		ccpd_law_l1(l);
		ca->law_e_prev_q10 = l->e_q10;
		ca->e_valid = 1;
		ca->law_dterm_q10 = l->dterm_q10;
		ca->w_q10 = l->w_out_q10;
	}
	o->snd_cwnd = ca->w_q10 >> 10;
	if (o->snd_cwnd < p->cwnd_min)
		o->snd_cwnd = p->cwnd_min;
}

/* Arm a packet pair when the window frees >= 2 units now; the kernel sends
 * the freed quota back to back right after this hook. */
CCL_CORE void ccpd_arm_pair(struct ccpd *ca, const struct ccl_ccpd_params *p,
			    const struct ccpd_ack *a, struct ccpd_out *o)
{
	if (ca->pair_state == CCPD_PAIR_IDLE && a->ca_state != CCL_CA_RECOVERY &&
	    (u8)(ca->round.cnt - ca->pair_round) >= p->probe_every && !a->app_limited &&
	    o->snd_cwnd > a->in_flight && o->snd_cwnd - a->in_flight >= 2 * p->probe_segs) {
		ca->pair_seq = a->snd_nxt;
		ca->pair_round = (u8)ca->round.cnt;
		ca->pair_state = CCPD_PAIR_ARMED;
		o->ev |= CCPD_EV_PAIR_ARMED;
	}
}

/* cong_control: every ACK, in the mode ccpd_mode_of chooses. */
CCL_CORE void ccpd_on_ack(struct ccpd *ca, const struct ccl_ccpd_params *p,
			  const struct ccpd_ack *a, struct ccpd_out *o)
{
	u32 dt_round, prev_min, drain_cw = 0;

	__builtin_memset(o, 0, sizeof(*o));
	o->snd_cwnd = a->snd_cwnd;
	o->law = p->mode ? CCPD_LAW_L1 : CCPD_LAW_L0;
	ccpd_share_sync(ca, p);
	dt_round = ccpd_ack_round(ca, p, a, o);
	if (a->ca_state == CCL_CA_RECOVERY && a->losses > 0) {
		o->losses = a->losses;
		ca->recov_losses += (u32)a->losses; /* see ccpd_on_recovery_ack */
	}

	o->mode = ccpd_mode_of(ca, p, a, o, false, &drain_cw);
	if (o->mode == CCPD_MODE_HOLD) {
		ccpd_ack_hold(ca, p, o);
		return;
	}
	if (o->mode == CCPD_MODE_SS_RTO) {
		ccpd_ack_ss_rto(ca, p, a, o);
		return;
	}
	prev_min = ccpd_ack_estimators(ca, p, a, o);
	ccpd_law_inputs(ca, p, a, o, prev_min);
	o->mode = ccpd_mode_of(ca, p, a, o, true, &drain_cw);
	if (o->mode == CCPD_MODE_SS)
		ccpd_ack_ss(ca, p, a, o);
	else if (o->mode == CCPD_MODE_RENO)
		ccpd_ack_reno(ca, a, o);
	else if (o->mode == CCPD_MODE_DRAIN)
		ccpd_ack_drain(p, a, o, drain_cw);
	else if (o->mode == CCPD_MODE_COMP)
		ccpd_ack_comp(ca, p, a, o);
	else
		ccpd_ack_law(ca, p, a, o, dt_round);
	ccpd_arm_pair(ca, p, a, o);
}

/*
 * ssthresh (Recovery/CWR entry, RTO from Open): the window to hold.
 *
 * Loss classification.  A loss is congestive when
 *   - the smoothed RTT shows a nearly full buffer: s >= m + 3/4 (rtt_max - m), or
 *   - Recovery is re-entered within one RTT of leaving it, or
 *   - the window is at the clamp: W >= cwnd_max - margin, or
 *   - it comes in slow start with the smoothed RTT showing a queue (the
 *     slow-start exit's delay test), or with ss_exit = 0, or (later,
 *     ccpd_on_recovery_ack)
 *   - the Recovery it opened has seen CCPD_BURST_LOSSES losses;
 * then the hold is ccpd_cong_hold (below the path storage), and a slow start
 * ends.  Otherwise it is random and W is held [P]; in slow start, slow start
 * goes on: ended by a random drop, slow start would stop at whatever window
 * the drop hit, a small part of a long path, with B at its floor and C at
 * 1.25x the flow's own delivery rate, and the law would take tens of
 * seconds to fill the path.
 * Returns the hold (>= 2); the class is left in ca->last_loss.
 */
CCL_CORE u32 ccpd_on_ssthresh(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 snd_cwnd,
			      u32 cwnd_clamp, u32 now_us)
{
	u32 c = ccpd_capacity(ca), m = ca->rtt_min_us, s = ccpd_rtts(ca);
	u32 hold = snd_cwnd, cmax;
	struct ccpd_est st;
	bool cong = false;

	ca->pair_state = CCPD_PAIR_IDLE;
	ca->recov_losses = 0;
	ca->sh &= ~CCPD_SH_DLOSS;
	/* a loss: the noise floor may hide a queue that overflowed */
	ca->noise_us /= 2;
	if (ca->sh & CCPD_SH_DRAINING) {
		/* a loss in a drain: judge the window the flow had before it */
		hold = snd_cwnd = snd_cwnd > ca->drain_w_saved ? snd_cwnd : ca->drain_w_saved;
		ca->sh &= ~CCPD_SH_DRAINING;
		ca->e_valid = 0; /* law_e_prev_q10 held drain_s_us */
		ca->sh |= CCPD_SH_DLOSS;
	}
	if (m == CCL_U32_MAX || !c) {
		/* No estimate yet: Reno's halving is the only safe choice. */
		hold = snd_cwnd / 2;
		cong = true;
	} else {
		bool queue = ccpd_loss_queue_seen(ca, p);

		if (ca->phase == CCL_PHASE_SS) {
			/* rtt_max and C still measure the slow start itself (C is
			 * 1.25x the flow's own rate, so the clamp is below the
			 * window): only the slow-start exit's delay test judges. */
			if (!p->ss_exit || ccpd_ss_queue_seen(m, s, CCPD_SS_EXIT_MIN_CWND))
				cong = true;
		} else {
			ccpd_storage_est(ca, c, p->b_min, &st);
			cmax = ccpd_cwnd_max(&st, p->cwnd_min, cwnd_clamp);
			if (queue && ca->recov_exit_us &&
			    now_us - ca->recov_exit_us < (s > m ? s : m))
				cong = true;
			if (queue && ca->rtt_max_us > m && s >= m + (ca->rtt_max_us - m) / 4 * 3)
				cong = true;
			if (queue && (u64)snd_cwnd + ccl_max64(2, (st.b_q10 >> 10) / 8) >= cmax)
				cong = true;
		}
		if (cong)
			hold = ccpd_cong_hold(ca, p, c, snd_cwnd, cwnd_clamp);
		else if (ca->phase == CCL_PHASE_CA && p->bmax_on_loss == 2)
			ccpd_relearn_bmax(ca, s, m);
	}
	ca->last_loss = cong ? CCPD_LOSS_CONGESTIVE : CCPD_LOSS_RANDOM;
	hold = ccpd_hold_floor(p, hold);
	ca->cwnd_hold = hold;
	if (ca->phase == CCL_PHASE_SS && cong)
		ccpd_ss_end(ca, hold);
	else if (ca->phase == CCL_PHASE_SS || cong)
		ca->w_q10 = hold << 10;
	return hold;
}

/*
 * set_state(new), called before icsk_ca_state changes (old = current).
 * Entry to Loss is handled here, not in cwnd_event(CA_EVENT_LOSS): an RTO in
 * Recovery skips ssthresh() and CA_EVENT_LOSS and only calls set_state.
 * Returns the slow-start target to write as snd_ssthresh on Loss entry, else 0.
 */
CCL_CORE u32 ccpd_on_set_state(struct ccpd *ca, const struct ccl_ccpd_params *p, u32 old_state,
			       u32 new_state, u32 snd_cwnd, u32 now_us)
{
	u32 w = ca->w_q10 >> 10;

	if (new_state == CCL_CA_RECOVERY || new_state == CCL_CA_LOSS) {
		ca->pair_state = CCPD_PAIR_IDLE;
		ca->sh &= ~CCPD_SH_DRAINING; /* the loss decides the window now */
	}
	if (new_state == CCL_CA_LOSS && old_state != CCL_CA_LOSS) {
		/* RTO: slow start from 1 back to the last CCPD window. */
		ca->rto_ss_target = w > p->cwnd_min ? w : p->cwnd_min;
		ca->phase = CCL_PHASE_SS_RTO;
		ca->e_valid = 0;
		return ca->rto_ss_target;
	}
	if ((old_state == CCL_CA_RECOVERY || old_state == CCL_CA_LOSS) &&
	    (new_state == CCL_CA_OPEN || new_state == CCL_CA_DISORDER)) {
		ca->w_q10 =
			(u32)ccl_min64((u64)ccl_max64(snd_cwnd, p->cwnd_min) << 10, CCL_U32_MAX);
		ca->e_valid = 0;
		ca->recov_exit_us = now_us ? now_us : 1;
	}
	return 0;
}

/*
 * Pacing rate, bytes/s: gain x W x mss / srtt, the kernel's own rule
 * (tcp_update_pacing_rate, which does not run for a CC with cong_control):
 * 2x in slow start, 1.2x after.  0 = no pacing: no smoothed RTT yet, or
 * one under rtt_floor.  There the RTT is the hosts' own, a window's burst
 * lasts less than the floor, and the kernel's internal pacing (an hrtimer
 * per 64-KiB burst at tens of Gbit/s) costs about a quarter of the rate
 * (docs/ccpd.md, "Paths of microseconds").
 */
CCL_CORE u64 ccpd_pacing_rate(u32 mss, u32 cwnd, u32 srtt_us, u32 slow_start, u32 rtt_floor_us)
{
	u64 r;

	if (!srtt_us || srtt_us < rtt_floor_us)
		return 0;
	r = (u64)mss * cwnd * CCL_USEC_PER_SEC / srtt_us;
	return slow_start ? 2 * r : r * 6 / 5;
}

/*
 * The RTT the pacing rate divides by: the kernel's smoothed RTT, or ccpd's
 * own (ccpd_rtts) where that is smaller.  An outage inflates the kernel's:
 * the packets that waited it out come back with RTTs of seconds, and its
 * 1/8 gain then needs tens of samples to come down.  Paced at W / srtt, a
 * flow whose window the law had cut sends one packet per second or two,
 * and so takes those samples a second or two apart: 13 s of outage on a
 * 5G/LTE log (lumos5g-lte-driving-1) left the kernel's srtt at 3-9 s and
 * the flow at 0.01 Mbit/s of 22-66 for the 11 s after it.  ccpd's own
 * samples are bounded by what was in flight ahead of them (ccpd_rtt_sample:
 * a stall is not a queue), so its smoothed RTT stays near the path's.
 * 0 (no sample of ccpd's yet): the kernel's.
 */
CCL_CORE u32 ccpd_pace_rtt(u32 srtt_us, u32 own_us)
{
	return own_us && own_us < srtt_us ? own_us : srtt_us;
}

/* undo_cwnd: after a spurious loss or RTO the kernel's collapse is undone. */
CCL_CORE u32 ccpd_on_undo(u32 snd_cwnd, u32 prior_cwnd)
{
	return snd_cwnd > prior_cwnd ? snd_cwnd : prior_cwnd;
}

#endif /* __CCPD_CORE_H */
