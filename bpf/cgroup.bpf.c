// SPDX-License-Identifier: GPL-2.0
/*
 * cgroup.bpf.c - per-cgroup controller choice (cgroup sock_ops).
 *
 * One instance of this object is loaded per binding and attached to one
 * cgroup (v2).  For the TCP connections of processes in that cgroup it
 *   - sets TCP_CONGESTION to the bound algorithm: on connect() before the SYN
 *     (BPF_SOCK_OPS_TCP_CONNECT_CB) and on accepted connections
 *     (BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB; a passive socket belongs to the
 *     cgroup of its listener);
 *   - binds the socket to a tunable profile in the shared socket-storage map
 *     `sk_profile`, which every controller reads (ccl_profile_of), so two
 *     cgroups can run one algorithm with different Kp/Kd or alpha/beta.
 * The storage is written before the CC is set, so the controller's first
 * hook already sees the profile.  Sockets outside bound cgroups are never
 * touched.  The binding (algorithm, profile) lives in the `binding` map,
 * written by ccload before attaching.
 *
 * Path rules (ccload_intf.h, struct ccl_path_rule): a binding may carry up
 * to CCL_CG_MAX_RULES rules in the `rules` map, prefix rules with their
 * prefixes in the `prefixes` LPM trie.  At connect() a connection gets the
 * first rule that can be decided then (a prefix rule, by the peer's
 * address) or the binding's default; when it is established (active or
 * passive) the rules are decided again with its handshake RTT, and an RTT
 * rule placed before the one chosen switches its CC, once.  A share rule
 * takes a fixed share of the connections by a keyed hash of their addresses
 * and ports, the same at connect() and when established (A/B arms inside
 * one cgroup).  Each rule has
 * its aggregate slot (1 + rule; slot 0 for the default), so connections,
 * bytes and retransmissions are counted per rule.
 *
 * Aggregates (ccload_agg.bpf.h, one slot): for every connection of the
 * cgroup, whatever its CC, the program asks for the RTT, retransmit, RTO
 * and state callbacks when it is established and feeds the `agg` map from
 * them: counter deltas and one histogram sample per smoothed RTT on RTT
 * callbacks, congestion-state changes as seen at the next RTT or
 * retransmit callback (the kernel has no callback for them; a Recovery
 * episode starts with a retransmission, so its start is exact and its end
 * is known within one ACK), RTOs from the RTO callback, the last deltas
 * when the socket closes.  A binding with an empty algorithm is a *watch*:
 * aggregates only, the cgroup keeps its CC (`ccload cgroup watch`).
 * Connections that existed before the program was attached are not seen.
 */
#include "ccload.bpf.h"

char _license[] SEC("license") = "GPL";

#define SOL_TCP 6
#define TCP_CONGESTION 13
#define CCL_TCP_CLOSE 7 /* BPF_TCP_CLOSE */

CCL_DEFINE_SK_PROFILE

#define CCL_AGG_SLOTS (1 + CCL_CG_MAX_RULES)
#include "ccload_agg.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ccl_cg_binding);
} binding SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CCL_CG_MAX_RULES);
	__type(key, u32);
	__type(value, struct ccl_path_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ccl_prefix_key);
	__type(value, u32);
} prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CCL_CG_NR_STATS);
	__type(key, u32);
	__type(value, u64);
} cg_stats SEC(".maps");

static __always_inline void cg_inc(u32 idx)
{
	u64 *c = bpf_map_lookup_elem(&cg_stats, &idx);

	if (c)
		CCL_ADD(c, 1);
}

/* What a connection is given: a CC name and a profile, and which rule chose
 * them (0 = the binding's default, 1 + i = rule i). */
struct cg_choice {
	const char *algo;
	u32 profile;
	u32 slot;
};

/* The rule whose prefix holds the peer's address, or -1. */
static __always_inline int cg_prefix_rule(struct bpf_sock_ops *skops)
{
	struct ccl_prefix_key k = {};
	u32 *r;

	if (skops->family == 2 /* AF_INET */) {
		k.prefixlen = 128;
		k.addr[10] = 0xff;
		k.addr[11] = 0xff;
		__builtin_memcpy(&k.addr[12], &skops->remote_ip4, 4);
	} else if (skops->family == 10 /* AF_INET6 */) {
		u32 a[4];

		k.prefixlen = 128;
		a[0] = skops->remote_ip6[0];
		a[1] = skops->remote_ip6[1];
		a[2] = skops->remote_ip6[2];
		a[3] = skops->remote_ip6[3];
		__builtin_memcpy(k.addr, a, 16);
	} else {
		return -1;
	}
	r = bpf_map_lookup_elem(&prefixes, &k);
	return r && *r < CCL_CG_MAX_RULES ? (int)*r : -1;
}

/* A connection's place for the share rules (ccl_conn_hash): its peer's
 * address and both ports. */
static __always_inline u32 cg_hash(struct bpf_sock_ops *skops, u32 key)
{
	u32 ports = skops->remote_port ^ (skops->local_port << 16);

	if (skops->family == 2 /* AF_INET */)
		return ccl_conn_hash(key, 0, 0, bpf_htonl(0xffff), skops->remote_ip4, ports);
	return ccl_conn_hash(key, skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2],
			     skops->remote_ip6[3], ports);
}

/* First match wins: the first rule, in order, that matches; `rtt_us` 0
 * means the RTT is not known yet (connect()), and RTT rules are passed
 * over. */
static __always_inline void cg_choose(struct bpf_sock_ops *skops, struct ccl_cg_binding *b,
				      u32 rtt_us, struct cg_choice *c)
{
	int pfx = cg_prefix_rule(skops);
	u32 n = b->nr_rules;
	/* The count in a register or a 64-bit spill, the map's key a copy on
	 * the stack: 6.1's and 6.12's verifiers keep no value of a 32-bit
	 * spill, so a count that lived in the key's slot read as unbounded
	 * and the loop was refused ("infinite loop detected"). */
	u64 i;

	c->algo = b->algo;
	c->profile = b->profile;
	c->slot = 0;
	for (i = 0; i < CCL_CG_MAX_RULES && i < n; i++) {
		u32 key = i;
		struct ccl_path_rule *r = bpf_map_lookup_elem(&rules, &key);
		int hit;

		if (!r)
			return;
		switch (r->kind) {
		case CCL_RULE_PREFIX:
			hit = pfx == (int)i;
			break;
		case CCL_RULE_RTT_GE:
			hit = rtt_us && rtt_us >= r->arg;
			break;
		case CCL_RULE_RTT_LT:
			hit = rtt_us && rtt_us < r->arg;
			break;
		case CCL_RULE_SHARE:
			hit = r->arg == CCL_U32_MAX || cg_hash(skops, r->key) < r->arg;
			break;
		default:
			hit = 0;
		}
		if (hit) {
			c->algo = r->algo;
			c->profile = r->profile;
			c->slot = 1 + i;
			return;
		}
	}
}

/* Bind a connection: profile into sk_profile, then TCP_CONGESTION.  Returns
 * 0, or the setsockopt error. */
static __always_inline int cg_bind(struct bpf_sock_ops *skops, struct bpf_sock *sk,
				   struct cg_choice *c)
{
	struct ccl_sk_binding *sb;
	char name[CCL_NAME_MAX];

	sb = bpf_sk_storage_get(&sk_profile, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (sb) {
		sb->profile = c->profile < CCL_NR_PROFILES ? c->profile : 0;
		sb->cgroup_bound = 1;
	}
	__builtin_memcpy(name, c->algo, sizeof(name));
	name[CCL_NAME_MAX - 1] = 0;
	if (!name[0])
		return 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name))) {
		cg_inc(CCL_CG_ERRORS);
		return -1;
	}
	return 0;
}

/* The aggregate inputs from the sock_ops context (a full socket). */
static __always_inline void cg_agg_in(struct ccl_agg_in *in, struct bpf_sock_ops *skops)
{
	in->now_ns = bpf_ktime_get_ns();
	in->bytes_acked = skops->bytes_acked;
	in->srtt_us = skops->srtt_us >> 3;
	in->cwnd = skops->snd_cwnd;
	in->mss = skops->mss_cache;
	in->rate_delivered = skops->rate_delivered;
	in->rate_interval_us = skops->rate_interval_us;
	in->segs_out = skops->data_segs_out;
	in->total_retrans = skops->total_retrans;
	in->bytes_received = skops->bytes_received;
}

/* The socket's congestion state (enum tcp_ca_state); 0 if unreadable. */
static __always_inline u32 cg_ca_state(struct bpf_sock *sk)
{
	struct tcp_sock *tp;

	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return CCL_CA_OPEN;
	return BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);
}

/* Aggregates: one callback of an established connection; `slot` is the
 * rule that chose its CC (the established callbacks only). */
static __always_inline void cg_agg(struct bpf_sock_ops *skops, struct bpf_sock *sk, u32 op,
				   u32 slot)
{
	struct ccl_agg_sk *s;
	struct ccl_agg_in in;
	struct ccl_agg *a;
	u32 st;

	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		a = ccl_agg_slot(slot);
		s = bpf_sk_storage_get(&agg_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!a || !s)
			return;
		s->slot = slot;
		bpf_sock_ops_cb_flags_set(
			skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG |
				       BPF_SOCK_OPS_RTO_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG);
		cg_agg_in(&in, skops);
		ccl_agg_start(a, s, &in, CCL_CA_OPEN);
		return;
	}
	s = bpf_sk_storage_get(&agg_sk, sk, 0, 0);
	if (!s || !s->started)
		return;
	a = ccl_agg_slot(s->slot);
	if (!a)
		return;
	cg_agg_in(&in, skops);
	switch (op) {
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == CCL_TCP_CLOSE)
			ccl_agg_end(a, s, &in);
		return;
	case BPF_SOCK_OPS_RTO_CB:
		CCL_ADD(&a->c[CCL_AGG_rtos], 1);
		break;
	default:
		break;
	}
	st = cg_ca_state(sk);
	if (st != s->ca_state) {
		ccl_agg_flush(a, s, &in);
		ccl_agg_state(a, s, st, in.now_ns, 0);
	}
	if (op == BPF_SOCK_OPS_RTT_CB)
		ccl_agg_tick(a, s, &in);
}

SEC("sockops")
int ccl_cgroup_sockops(struct bpf_sock_ops *skops)
{
	struct ccl_cg_binding *b;
	struct cg_choice c = {};
	struct bpf_sock *sk;
	u32 op = skops->op;
	u32 zero = 0;

	sk = skops->sk;
	if (!sk)
		return 1;
	b = bpf_map_lookup_elem(&binding, &zero);
	switch (op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		/* Before the SYN: what can be decided without an RTT. */
		if (b && b->algo[0]) {
			cg_choose(skops, b, 0, &c);
			if (!cg_bind(skops, sk, &c))
				cg_inc(CCL_CG_ACTIVE);
		}
		return 1;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		/* The handshake's RTT is known: an RTT rule before the one
		 * chosen at connect() switches the connection, once (the same
		 * CC again is no change for the kernel: no reinit). */
		if (b && b->algo[0]) {
			struct cg_choice c0 = {};

			cg_choose(skops, b, 0, &c0);
			cg_choose(skops, b, (skops->srtt_us >> 3) ?: 1, &c);
			if (c.slot != c0.slot)
				cg_bind(skops, sk, &c);
		}
		cg_agg(skops, sk, op, c.slot);
		return 1;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (b && b->algo[0]) {
			cg_choose(skops, b, (skops->srtt_us >> 3) ?: 1, &c);
			if (!cg_bind(skops, sk, &c))
				cg_inc(CCL_CG_PASSIVE);
		}
		cg_agg(skops, sk, op, c.slot);
		return 1;
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_RETRANS_CB:
	case BPF_SOCK_OPS_RTO_CB:
	case BPF_SOCK_OPS_STATE_CB:
		cg_agg(skops, sk, op, 0);
		return 1;
	default:
		return 1;
	}
}
