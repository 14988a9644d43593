// SPDX-License-Identifier: GPL-2.0
/*
 * bench.bpf.c - a synthetic telemetry producer for `cargo xtask bench`.
 *
 * One BPF_PROG_TYPE_SYSCALL program, run by the bench through
 * BPF_PROG_TEST_RUN, writes `n` well-formed ccpd records into `events`,
 * which the bench points at an attached controller's pinned ring buffer
 * (map reuse): `ccload watch` then reads them exactly as it reads a
 * controller's, at a rate the bench controls.  Records rotate over `flows`
 * cookies; reservations that find the ring full are counted in `dropped`.
 * Never attached to anything: it runs only when the bench calls it.
 */
#include "ccload.bpf.h"

char _license[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, CCL_RINGBUF_BYTES);
} events SEC(".maps");

/* The test-run context.  All u64: bpf_loop's inlined bound check reads
 * nr_loops as a whole register, so a u32 loaded as half of a u64 pair
 * would carry the other field in its upper bits. */
struct ccl_bench_args {
	u64 n;	   /* records to write in this run (<= 1 << 16) */
	u64 flows; /* distinct cookies */
	u64 seq;   /* sequence number of the first record */
};

u64 written = 0;
u64 dropped = 0;

static long bench_one(u64 i, void *ctx)
{
	struct ccl_bench_args *a = ctx;
	struct ccl_event *ev;
	u64 seq = a->seq + i;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&dropped, 1);
		return 0;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->cookie = 1 + seq % (a->flows ? a->flows : 1);
	ev->mstamp_us = bpf_ktime_get_ns() / 1000;
	ev->algo = CCL_ALGO_CCPD;
	ev->round = (u32)seq;
	ev->snd_cwnd = 10 + (u32)(seq & 1023);
	ev->srtt_us = 20000;
	ev->mss = 1448;
	ev->family = AF_INET;
	ev->sport = 40000 + (u16)(ev->cookie & 0xfff);
	ev->dport = 5201;
	ev->phase = CCL_PHASE_CA;
	ev->saddr[0] = 10;
	ev->daddr[0] = 10;
	ev->u.ccpd.w_q10 = ev->snd_cwnd << 10;
	ev->u.ccpd.c_sps = 8000;
	bpf_ringbuf_submit(ev, 0);
	__sync_fetch_and_add(&written, 1);
	return 0;
}

SEC("syscall")
int ccl_bench_produce(struct ccl_bench_args *a)
{
	struct ccl_bench_args args = *a;

	return bpf_loop(args.n, bench_one, &args, 0) < 0;
}
