/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccload_agg.bpf.h - the aggregate maps of one BPF object and the hooks that
 * feed them (arithmetic in core/agg_core.h).  Included by ccload_maps.bpf.h
 * (every controller: one slot per profile) and by cgroup.bpf.c (one slot).
 *
 *   agg     PERCPU_ARRAY[CCL_AGG_SLOTS] of struct ccl_agg (pinned)
 *   agg_sk  socket storage of struct ccl_agg_sk (this object's own)
 */
#ifndef __CCLOAD_AGG_BPF_H
#define __CCLOAD_AGG_BPF_H

#include "core/agg_core.h"

#ifndef CCL_AGG_SLOTS
#error "define CCL_AGG_SLOTS before including ccload_agg.bpf.h"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CCL_AGG_SLOTS);
	/* By size, not BTF types: the skeleton generator would emit a Rust copy
	 * of struct ccl_agg that cannot derive Default ([u64; 256]); the loader
	 * reads it through bindgen's struct ccl_agg instead. */
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(struct ccl_agg));
} agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ccl_agg_sk);
} agg_sk SEC(".maps");

static __always_inline struct ccl_agg *ccl_agg_slot(u32 slot)
{
	if (slot >= CCL_AGG_SLOTS)
		slot = 0;
	return bpf_map_lookup_elem(&agg, &slot);
}

/* The inputs of agg_core.h from a struct_ops socket. */
static __always_inline void ccl_agg_in_tp(struct ccl_agg_in *in, const struct tcp_sock *tp)
{
	in->now_ns = bpf_ktime_get_ns();
	in->bytes_acked = tp->bytes_acked;
	in->srtt_us = tp->srtt_us >> 3;
	in->cwnd = tp->snd_cwnd;
	in->mss = tp->mss_cache;
	in->rate_delivered = tp->rate_delivered;
	in->rate_interval_us = tp->rate_interval_us;
	in->segs_out = tp->data_segs_out;
	in->total_retrans = tp->total_retrans;
	in->bytes_received = tp->bytes_received;
}

/* Controllers: from init(), count the flow in under its profile. */
static __always_inline void ccl_agg_init(struct sock *sk, u32 profile)
{
	struct ccl_agg_sk *s;
	struct ccl_agg_in in;
	struct ccl_agg *a;

	a = ccl_agg_slot(profile);
	s = bpf_sk_storage_get(&agg_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!a || !s)
		return;
	/* The kernel runs init twice for a socket given its CC before the SYN
	 * (at setsockopt, again when established): one flow, counted once.  A
	 * socket that left us ran release(), which ended it (started = 0). */
	if (s->started)
		return;
	s->rec_start_ns = 0;
	s->slot = profile;
	ccl_agg_in_tp(&in, tcp_sk(sk));
	ccl_agg_start(a, s, &in, ccl_ca_state(sk));
}

/* A counted-in flow's bookkeeping (*sp) and its slot; NULL if the flow was
 * not counted in (it started before this object was attached). */
static __always_inline struct ccl_agg *ccl_agg_flow(struct sock *sk, struct ccl_agg_sk **sp)
{
	struct ccl_agg_sk *s = bpf_sk_storage_get(&agg_sk, sk, 0, 0);

	if (!s || !s->started)
		return NULL;
	*sp = s;
	return ccl_agg_slot(s->slot);
}

/* Controllers: from pkts_acked (every ACK that acks or SACKs data, in every
 * state).  Cheap when no sample is due: two lookups and a compare. */
static __always_inline void ccl_agg_ack(struct sock *sk)
{
	struct ccl_agg_sk *s = NULL;
	struct ccl_agg_in in;
	struct ccl_agg *a;

	a = ccl_agg_flow(sk, &s);
	if (!a || !s)
		return;
	ccl_agg_in_tp(&in, tcp_sk(sk));
	ccl_agg_tick(a, s, &in);
}

/* Controllers: from set_state (before icsk_ca_state changes). */
static __always_inline void ccl_agg_set_state(struct sock *sk, u32 new_state)
{
	struct ccl_agg_sk *s = NULL;
	struct ccl_agg_in in;
	struct ccl_agg *a;

	a = ccl_agg_flow(sk, &s);
	if (!a || !s)
		return;
	ccl_agg_in_tp(&in, tcp_sk(sk));
	ccl_agg_flush(a, s, &in);
	ccl_agg_state(a, s, new_state, in.now_ns, 1);
}

/* Controllers: from release(). */
static __always_inline void ccl_agg_release(struct sock *sk)
{
	struct ccl_agg_sk *s = NULL;
	struct ccl_agg_in in;
	struct ccl_agg *a;

	a = ccl_agg_flow(sk, &s);
	if (!a || !s)
		return;
	ccl_agg_in_tp(&in, tcp_sk(sk));
	ccl_agg_end(a, s, &in);
}

/* Controllers: trace_ms per-flow time sampling of telemetry records. */
static __always_inline bool ccl_trace_ms(struct sock *sk, u32 trace_ms)
{
	struct ccl_agg_sk *s;

	if (!trace_ms)
		return true;
	s = bpf_sk_storage_get(&agg_sk, sk, 0, 0);
	/* The flow's clock (tcp_mstamp): the same as the records' t_us. */
	return !s || ccl_trace_ms_due(s, tcp_sk(sk)->tcp_mstamp * 1000, trace_ms);
}

#endif /* __CCLOAD_AGG_BPF_H */
