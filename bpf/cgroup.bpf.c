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
 */
#include "ccload.bpf.h"

char _license[] SEC("license") = "GPL";

#define SOL_TCP 6
#define TCP_CONGESTION 13

CCL_DEFINE_SK_PROFILE

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ccl_cg_binding);
} binding SEC(".maps");

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
		*c += 1;
}

SEC("sockops")
int ccl_cgroup_sockops(struct bpf_sock_ops *skops)
{
	struct ccl_sk_binding *sb;
	struct ccl_cg_binding *b;
	char name[CCL_NAME_MAX];
	struct bpf_sock *sk;
	u32 zero = 0;
	int passive;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		passive = 0;
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		passive = 1;
		break;
	default:
		return 1;
	}
	sk = skops->sk;
	b = bpf_map_lookup_elem(&binding, &zero);
	if (!sk || !b || !b->algo[0])
		return 1;
	sb = bpf_sk_storage_get(&sk_profile, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (sb) {
		sb->profile = b->profile < CCL_NR_PROFILES ? b->profile : 0;
		sb->cgroup_bound = 1;
	}
	__builtin_memcpy(name, b->algo, sizeof(name));
	name[CCL_NAME_MAX - 1] = 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name))) {
		cg_inc(CCL_CG_ERRORS);
		return 1;
	}
	cg_inc(passive ? CCL_CG_PASSIVE : CCL_CG_ACTIVE);
	return 1;
}
