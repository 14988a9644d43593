/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccload.bpf.h - BPF-only helpers shared by the four controllers.
 *
 * Socket accessors and kfuncs.  The maps every controller has, and the
 * helpers that use them, are in ccload_maps.bpf.h (included once per
 * controller after it names its params).
 */
#ifndef __CCLOAD_BPF_H
#define __CCLOAD_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "ccload_intf.h"
#include "core/ccl_core.h"

#define AF_INET 2
#define AF_INET6 10
#define TCP_INFINITE_SSTHRESH 0x7fffffff

/* The socket-storage map shared by every controller and every cgroup
 * binding (one pinned map: ccload pins it at <pin root>/sk_profile). */
#define CCL_DEFINE_SK_PROFILE                          \
	struct {                                       \
		__uint(type, BPF_MAP_TYPE_SK_STORAGE); \
		__uint(map_flags, BPF_F_NO_PREALLOC);  \
		__type(key, int);                      \
		__type(value, struct ccl_sk_binding);  \
	} sk_profile SEC(".maps");

/* Kernel CC helpers exported to struct_ops programs as kfuncs. */
extern u32 tcp_slow_start(struct tcp_sock *tp, u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, u32 w, u32 acked) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, u32 ack, u32 acked) __ksym;
extern u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline u8 ccl_ca_state(const struct sock *sk)
{
	return (u8)BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);
}

static __always_inline u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

static __always_inline bool before(u32 seq1, u32 seq2)
{
	return (s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

/* tcp_is_cwnd_limited() is a static inline in the kernel; this is its current
 * form (include/net/tcp.h since "tcp: fix cwnd-limited bug for TSO deferral
 * where we send nothing", 2022): is_cwnd_limited first, and only then slow
 * start's "twice what was ACKed".  The older form, still the one in
 * tools/testing/selftests/bpf/progs/bpf_cubic.c, checks slow start first,
 * and so stops a cwnd-limited slow start whenever cwnd >= 2 max_packets_out
 * (TSO deferral, small windows after an RTO), where the kernel's own reno
 * and cubic grow. */
static __always_inline bool tcp_is_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	/* If in slow start, ensure cwnd grows to twice what was ACKed. */
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

/* Fill the algorithm-independent part of a telemetry record. */
static __always_inline void ccl_event_fill(struct ccl_event *ev, const struct sock *sk, u32 algo,
					   u32 round, u8 phase, u32 profile)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	u16 family = sk->__sk_common.skc_family;

	ev->cookie = (u64)sk->__sk_common.skc_cookie.counter;
	ev->mstamp_us = tp->tcp_mstamp;
	ev->algo = algo;
	ev->round = round;
	ev->snd_cwnd = tp->snd_cwnd;
	ev->snd_ssthresh = tp->snd_ssthresh;
	ev->srtt_us = tp->srtt_us >> 3;
	ev->in_flight = tcp_packets_in_flight(tp);
	ev->mss = tp->mss_cache;
	ev->family = family;
	ev->sport = sk->__sk_common.skc_num;
	ev->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	ev->ca_state = ccl_ca_state(sk);
	ev->phase = phase;
	ev->profile = profile;
	if (family == AF_INET6) {
		__builtin_memcpy(ev->saddr, &sk->__sk_common.skc_v6_rcv_saddr, 16);
		__builtin_memcpy(ev->daddr, &sk->__sk_common.skc_v6_daddr, 16);
	} else {
		__builtin_memset(ev->saddr, 0, 16);
		__builtin_memset(ev->daddr, 0, 16);
		__builtin_memcpy(ev->saddr, &sk->__sk_common.skc_rcv_saddr, 4);
		__builtin_memcpy(ev->daddr, &sk->__sk_common.skc_daddr, 4);
	}
}

/* ktime in whole seconds (the age of per-path state) */
static __always_inline u32 ccl_now_s(void)
{
	return (u32)(bpf_ktime_get_ns() / CCL_NSEC_PER_SEC);
}

/* A path as the flows to one destination see it: per network namespace and
 * destination address (ccpd's buffer and base RTT, ctcp_plus's gamma). */
struct ccl_path_key {
	u64 net_cookie;
	u32 family;
	u32 daddr[4];
};

static __always_inline void ccl_path_key_of(struct sock *sk, struct ccl_path_key *k)
{
	k->net_cookie = sk->__sk_common.skc_net.net->net_cookie;
	k->family = sk->__sk_common.skc_family;
	if (k->family == AF_INET6)
		__builtin_memcpy(k->daddr, &sk->__sk_common.skc_v6_daddr, 16);
	else
		k->daddr[0] = sk->__sk_common.skc_daddr;
}

#endif /* __CCLOAD_BPF_H */
