// SPDX-License-Identifier: GPL-2.0
/*
 * migrate.bpf.c - move the open sockets of an upgraded controller onto its
 * new code (`ccload attach --replace`, loader/src/bpf/upgrade.rs).
 *
 * Swapping a struct_ops link registers the new tcp_congestion_ops under the
 * same name, but every socket keeps the ops pointer it was given: the old
 * programs keep running for it, on the old maps, until it closes, and a
 * listener hands the old ops to every connection it accepts.  This tcp
 * iterator (one pass per network namespace) sets TCP_CONGESTION again, by
 * name, on each full socket whose controller is `target`: the kernel finds
 * the new ops, releases the old ones for that socket, clears the
 * controller's private area and runs the new init() (tcp_reinit_congestion_control).
 * The window and ssthresh are the kernel's and stay; per-flow state that the
 * new code might read differently is started afresh, never reinterpreted.
 * A socket already on the new ops is left as it is (the kernel compares the
 * pointers), so a second pass changes nothing.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

#define SOL_TCP 6
#define TCP_CONGESTION 13
#define CCL_CA_NAME_MAX 16

/* The controller's name, NUL-padded (set before load). */
const volatile char target[CCL_CA_NAME_MAX] = {};

/* Per pass (ccload reads them after each namespace's pass). */
u64 matched = 0; /* sockets on `target` */
u64 failed = 0;	 /* of those, setsockopt refused */

SEC("iter/tcp")
int ccl_migrate(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	char name[CCL_CA_NAME_MAX] = {};
	struct tcp_sock *tp;
	int i;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0; /* request and time-wait sockets have no controller */
	if (bpf_getsockopt(tp, SOL_TCP, TCP_CONGESTION, name, sizeof(name)))
		return 0;
	for (i = 0; i < CCL_CA_NAME_MAX; i++) {
		if (name[i] != target[i])
			return 0;
		if (!name[i])
			break;
	}
	__sync_fetch_and_add(&matched, 1);
	if (bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, (void *)target, sizeof(target)))
		__sync_fetch_and_add(&failed, 1);
	return 0;
}
