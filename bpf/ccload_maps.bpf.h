/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccload_maps.bpf.h - the maps every controller object has, and the helpers
 * that use them.  Include it once per controller, after naming its params:
 *
 *	#define CCL_PARAMS struct ccl_ccpd_params
 *	#define CCL_PARAMS_TABLE CCL_CCPD_PARAMS
 *	#include "ccload_maps.bpf.h"
 *
 * The loader treats every controller alike and pins its maps under
 * /sys/fs/bpf/ccload/<algo>/:
 *   params  ARRAY[CCL_NR_PROFILES] of struct ccl_<algo>_params (live tunables)
 *   stats   PERCPU_ARRAY[CCL_NR_STATS] of u64
 *   events  RINGBUF of struct ccl_event (per-round telemetry)
 *   meta    ARRAY[1] of struct ccl_meta (what detach must restore)
 *   agg     PERCPU_ARRAY[CCL_NR_PROFILES] of struct ccl_agg (aggregates per
 *           profile, ccload_agg.bpf.h)
 * plus the socket storages sk_profile (shared with the cgroup bindings),
 * agg_sk (a flow's aggregates, ccload_agg.bpf.h) and guard_sk (the guard
 * against skipped hooks, below).
 *
 * Defined here: stat_add/stat_inc, ccl_profile_of, ccl_params (the clamped
 * params reader), ccl_event_reserve/ccl_event_submit, the guard, the hook
 * wrappers every controller's programs are written with (CCL_INIT,
 * CCL_PKTS_ACKED, CCL_CONG_AVOID or CCL_CONG_CONTROL, CCL_SSTHRESH,
 * CCL_SET_STATE), and the shared `ccl_release` struct_ops program.
 */
#ifndef __CCLOAD_MAPS_BPF_H
#define __CCLOAD_MAPS_BPF_H

#if !defined(CCL_PARAMS) || !defined(CCL_PARAMS_TABLE)
#error "define CCL_PARAMS and CCL_PARAMS_TABLE before including ccload_maps.bpf.h"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CCL_NR_PROFILES);
	__type(key, u32);
	__type(value, CCL_PARAMS);
} params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CCL_NR_STATS);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
#ifdef CCL_FIXTURE_LAYOUT
	__uint(max_entries, CCL_RINGBUF_BYTES / 2); /* the upgrade tests' fixture: another ring */
#else
	__uint(max_entries, CCL_RINGBUF_BYTES);
#endif
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ccl_meta);
} meta SEC(".maps");

CCL_DEFINE_SK_PROFILE

#define CCL_AGG_SLOTS CCL_NR_PROFILES
#include "ccload_agg.bpf.h"

static __always_inline void stat_add(u32 idx, u64 v)
{
	u64 *c = bpf_map_lookup_elem(&stats, &idx);

	if (c)
		CCL_ADD(c, v);
}

static __always_inline void stat_inc(u32 idx)
{
	stat_add(idx, 1);
}

/* Profile bound to this socket by a cgroup binding; 0 = defaults. */
static __always_inline u32 ccl_profile_of(const struct sock *sk)
{
	struct ccl_sk_binding *b;

	b = bpf_sk_storage_get(&sk_profile, (void *)sk, 0, 0);
	if (!b)
		return 0;
	if (b->profile >= CCL_NR_PROFILES) {
		stat_inc(CCL_STAT_PROFILE_MISS);
		return 0;
	}
	return b->profile;
}

/*
 * Copy the tunables of `profile` from the params map and clamp every field
 * to the range declared in ccload_intf.h (userspace writes are not
 * trusted).  A failed lookup falls back to the defaults.
 */
#define CCL_PARAM_CLAMP(field, name, scale, def, lo, hi, unit, help) \
	p->field = ccl_clamp_u32(p->field, lo, hi, &hit);
#define CCL_PARAM_DEFAULT(field, name, scale, def, lo, hi, unit, help) .field = def,

static __always_inline void ccl_params(u32 profile, CCL_PARAMS *p)
{
	CCL_PARAMS *m;
	u32 hit = 0;

	if (profile >= CCL_NR_PROFILES)
		profile = 0;
	m = bpf_map_lookup_elem(&params, &profile);
	if (!m) {
		CCL_PARAMS d = { CCL_PARAMS_TABLE(CCL_PARAM_DEFAULT)
					 CCL_TEST_PARAMS(CCL_PARAM_DEFAULT) };

		*p = d;
		stat_inc(CCL_STAT_PROFILE_MISS);
		return;
	}
	*p = *m;
	CCL_PARAMS_TABLE(CCL_PARAM_CLAMP)
	CCL_TEST_PARAMS(CCL_PARAM_CLAMP)
	if (hit)
		stat_inc(CCL_STAT_PARAM_CLAMPED);
}

/* Reserve a record with its header filled and union zeroed; a full ring is
 * counted, never silent.  Submit with ccl_event_submit(). */
static __always_inline struct ccl_event *ccl_event_reserve(const struct sock *sk, u32 algo,
							   u32 round, u8 phase, u32 profile)
{
	struct ccl_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

	if (!ev) {
		stat_inc(CCL_STAT_RB_RESERVE_FAIL);
		return NULL;
	}
	ccl_event_fill(ev, sk, algo, round, phase, profile);
	__builtin_memset(&ev->u, 0, sizeof(ev->u));
	return ev;
}

/*
 * Submit without waking the reader unless CCL_RB_WAKE_BYTES (about 1800
 * records) are waiting; readers drain the ring every CCL_RB_DRAIN_MS anyway.
 * The ring's default wakes the reader for every record that lands in an
 * empty ring, which with a prompt reader is every record: an irq_work from
 * the ACK's softirq and a reader thread scheduled, per flow per round, which
 * costs a record several times its own BPF time (docs/telemetry.md, "the
 * cost in CPU").
 */
static __always_inline void ccl_event_submit(struct ccl_event *ev)
{
	u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(ev,
			   waiting >= CCL_RB_WAKE_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	stat_inc(CCL_STAT_EVENTS);
}

/*
 * The guard (ccl_guard_ssth() and ccl_guard_cwnd() in core/ccl_core.h say
 * why): per socket, what our hooks last saw of a reduction and of the
 * window.  Every ssthresh() returns through ccl_ssth_mark(); set_state()
 * into a reduction, and any hook that writes snd_ssthresh in one, marks
 * too; cong_avoid()/cong_control() record the window they leave.
 * pkts_acked() (every ACK, before the kernel's loss recovery and PRR read
 * ssthresh) calls ccl_guard().  The hook wrappers below make those calls.
 * A repair is counted (ssth_repaired, cwnd_repaired), never silent.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ccl_guard_st);
} guard_sk SEC(".maps");

static __always_inline struct ccl_guard_st *ccl_guard_of(struct sock *sk)
{
	return bpf_sk_storage_get(&guard_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

static __always_inline u32 ccl_ssth_mark(struct sock *sk, u32 ssth)
{
	struct ccl_guard_st *g = ccl_guard_of(sk);

	if (g)
		ccl_guard_mark(g, tcp_sk(sk)->snd_nxt, ssth);
	return ssth;
}

/* The end of every cong_avoid()/cong_control(): the window it left. */
static __always_inline void ccl_guard_wrote_cwnd(struct sock *sk)
{
	struct ccl_guard_st *g = ccl_guard_of(sk);

	if (g)
		ccl_guard_wrote(g, tcp_sk(sk)->snd_cwnd);
}

/* Every write of snd_ssthresh by a controller goes through here. */
static __always_inline void ccl_set_ssthresh(struct sock *sk, u32 ssth)
{
	tcp_sk(sk)->snd_ssthresh = ssth;
	ccl_ssth_mark(sk, ssth);
}

/* set_state(): a reduction starts with the kernel's ssthresh in place. */
static __always_inline void ccl_guard_state(struct sock *sk, u8 new_state)
{
	struct ccl_guard_st *g;

	if (new_state < TCP_CA_CWR || new_state == ccl_ca_state(sk))
		return;
	g = ccl_guard_of(sk);
	if (!g)
		return;
	if (g->fault) {
		g->fault = 0; /* skipped with the ssthresh() before it */
		return;
	}
	ccl_guard_mark(g, tcp_sk(sk)->snd_nxt, tcp_sk(sk)->snd_ssthresh);
}

static __always_inline void ccl_guard(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccl_guard_st *g = ccl_guard_of(sk);
	u32 fix;

	if (!g)
		return;
	fix = ccl_guard_ssth(g, ccl_ca_state(sk), tp->high_seq, tp->snd_ssthresh, tp->prior_cwnd);
	if (fix) {
		tp->snd_ssthresh = fix;
		stat_inc(CCL_STAT_SSTH_REPAIRED);
	}
	fix = ccl_guard_cwnd(g, tp->snd_cwnd, tp->prior_cwnd, tp->snd_ssthresh,
			     tcp_packets_in_flight(tp));
	if (fix) {
		tp->snd_cwnd = fix;
		stat_inc(CCL_STAT_CWND_REPAIRED);
	}
}

/*
 * set_state(new_state), before icsk_ca_state changes: is this the entry to
 * Loss of an RTO that fired in CWR or Recovery?  tcp_enter_loss() then
 * calls neither ssthresh() nor cwnd_event(CA_EVENT_LOSS) (the reduction of
 * this window was made already; high_seq is still the recovery's), so a
 * controller that resets its state on CA_EVENT_LOSS must do it here.
 */
static __always_inline bool ccl_rto_skipped_loss_event(struct sock *sk, u8 new_state)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u8 old = ccl_ca_state(sk);

	return new_state == TCP_CA_Loss && (old == TCP_CA_CWR || old == TCP_CA_Recovery) &&
	       (s32)(tp->high_seq - tp->snd_una) > 0;
}

/* Every controller's init() ends with this (CCL_INIT): count the flow in. */
static __always_inline void ccl_flow_init(struct sock *sk)
{
	stat_inc(CCL_STAT_FLOW_INIT);
	ccl_agg_init(sk, ccl_profile_of(sk));
}

/*
 * Fault injection for the guard's tests (the fault_skip tunable, which only
 * test builds of ccload set; 0 everywhere else): with probability 1/n this
 * ssthresh() returns what a skipped one returns and leaves no mark, nor
 * does the set_state() that follows.
 */
static __always_inline bool ccl_fault_skip(struct sock *sk)
{
	struct ccl_guard_st *g;
	CCL_PARAMS p;

	ccl_params(ccl_profile_of(sk), &p);
	if (!p.fault_skip || bpf_get_prandom_u32() % p.fault_skip)
		return false;
	g = ccl_guard_of(sk);
	if (!g)
		return false;
	g->fault = 1;
	return true;
}

/*
 * The hooks, each a wrapper around the controller's body that does what
 * every controller must (the guard, the flow counts, the aggregates), so
 * that a controller cannot forget it.  Written like BPF_PROG, the body
 * follows the macro:
 *
 *	CCL_SSTHRESH(demo_ssthresh)
 *	{
 *		return tcp_reno_ssthresh(sk);
 *	}
 *
 *   CCL_INIT(name)           body(sk), then ccl_flow_init()
 *   CCL_PKTS_ACKED(name)     ccl_guard() and ccl_agg_ack(), then body(sk, sample)
 *   CCL_CONG_AVOID(name)     body(sk, ack, acked), then ccl_guard_wrote_cwnd()
 *   CCL_CONG_CONTROL(name)   body(sk, ack, flag, rs), then ccl_guard_wrote_cwnd()
 *   CCL_CONG_CONTROL_SK_RS(name)  name##_sk_rs: body(sk, rs), as Linux < 6.10
 *                            calls cong_control, then ccl_guard_wrote_cwnd()
 *   CCL_SSTHRESH(name)       ccl_ssth_mark() of what body(sk) returns
 *   CCL_SET_STATE(name)      ccl_guard_state() and ccl_agg_set_state(),
 *                            then body(sk, new_state)
 * A controller needs pkts_acked, set_state and ssthresh for the guard even
 * when its law needs none of them (an empty body).
 */
#define CCL_HOOK_BODY(name, ret, ...) static __always_inline ret name##_body(__VA_ARGS__)

#define CCL_INIT(name)                              \
	CCL_HOOK_BODY(name, void, struct sock *sk); \
	SEC("struct_ops")                           \
	void BPF_PROG(name, struct sock *sk)        \
	{                                           \
		name##_body(sk);                    \
		ccl_flow_init(sk);                  \
	}                                           \
	CCL_HOOK_BODY(name, void, struct sock *sk)

#define CCL_PKTS_ACKED(name)                                                         \
	CCL_HOOK_BODY(name, void, struct sock *sk, const struct ack_sample *sample); \
	SEC("struct_ops")                                                            \
	void BPF_PROG(name, struct sock *sk, const struct ack_sample *sample)        \
	{                                                                            \
		ccl_guard(sk);                                                       \
		ccl_agg_ack(sk);                                                     \
		name##_body(sk, sample);                                             \
	}                                                                            \
	CCL_HOOK_BODY(name, void, struct sock *sk, const struct ack_sample *sample)

#define CCL_CONG_AVOID(name)                                            \
	CCL_HOOK_BODY(name, void, struct sock *sk, u32 ack, u32 acked); \
	SEC("struct_ops")                                               \
	void BPF_PROG(name, struct sock *sk, u32 ack, u32 acked)        \
	{                                                               \
		name##_body(sk, ack, acked);                            \
		ccl_guard_wrote_cwnd(sk);                               \
	}                                                               \
	CCL_HOOK_BODY(name, void, struct sock *sk, u32 ack, u32 acked)

#define CCL_CONG_CONTROL(name)                                                                \
	CCL_HOOK_BODY(name, void, struct sock *sk, u32 ack, int flag,                         \
		      const struct rate_sample *rs);                                          \
	SEC("struct_ops")                                                                     \
	void BPF_PROG(name, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs) \
	{                                                                                     \
		name##_body(sk, ack, flag, rs);                                               \
		ccl_guard_wrote_cwnd(sk);                                                     \
	}                                                                                     \
	CCL_HOOK_BODY(name, void, struct sock *sk, u32 ack, int flag, const struct rate_sample *rs)

/* Before Linux 6.10 the kernel calls cong_control(sk, rs).  A controller
 * whose law reads neither ack nor flag runs there too: a second program,
 * name##_sk_rs, with its own body (the controller's, on the state it can
 * pass there), for a second struct_ops map `<map>_sk_rs` naming it; ccload
 * creates one of the two maps and loads one of the two programs, by the
 * running kernel's cong_control (loader/src/bpf/load.rs, choose_cong_control). */
#define CCL_CONG_CONTROL_SK_RS(name)                                                      \
	CCL_HOOK_BODY(name##_sk_rs, void, struct sock *sk, const struct rate_sample *rs); \
	SEC("struct_ops")                                                                 \
	void BPF_PROG(name##_sk_rs, struct sock *sk, const struct rate_sample *rs)        \
	{                                                                                 \
		name##_sk_rs_body(sk, rs);                                                \
		ccl_guard_wrote_cwnd(sk);                                                 \
	}                                                                                 \
	CCL_HOOK_BODY(name##_sk_rs, void, struct sock *sk, const struct rate_sample *rs)

#define CCL_SSTHRESH(name)                         \
	CCL_HOOK_BODY(name, u32, struct sock *sk); \
	SEC("struct_ops")                          \
	__u32 BPF_PROG(name, struct sock *sk)      \
	{                                          \
		u32 ssth = name##_body(sk);        \
                                                   \
		if (ccl_fault_skip(sk))            \
			return CCL_SKIPPED_SSTH;   \
		return ccl_ssth_mark(sk, ssth);    \
	}                                          \
	CCL_HOOK_BODY(name, u32, struct sock *sk)

#define CCL_SET_STATE(name)                                         \
	CCL_HOOK_BODY(name, void, struct sock *sk, __u8 new_state); \
	SEC("struct_ops")                                           \
	void BPF_PROG(name, struct sock *sk, __u8 new_state)        \
	{                                                           \
		ccl_guard_state(sk, new_state);                     \
		ccl_agg_set_state(sk, new_state);                   \
		name##_body(sk, new_state);                         \
	}                                                           \
	CCL_HOOK_BODY(name, void, struct sock *sk, __u8 new_state)

/* Should this round be traced?  trace_every = 0 turns telemetry off;
 * trace_ms > 0 also limits the flow to one record per trace_ms. */
#define ccl_trace_due(sk, round, p) \
	((p).trace_every && ((round) % (p).trace_every) == 0 && ccl_trace_ms(sk, (p).trace_ms))

/* The same release for every controller: count the flow out. */
SEC("struct_ops")
void BPF_PROG(ccl_release, struct sock *sk)
{
	stat_inc(CCL_STAT_FLOW_RELEASE);
	ccl_agg_release(sk);
}

#endif /* __CCLOAD_MAPS_BPF_H */
