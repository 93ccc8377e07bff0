// NettyBench: the workloads of bench/run.lua against Netty's HashedWheelTimer
// (Debian's libnetty-java), 1 ms tick, 512 slots. Prints one key=value line.
//
// usage: java -cp netty-common.jar:. NettyBench WORKLOAD [scale]
// Caller-side costs only: newTimeout() queues the timeout for the worker and
// cancel() queues the cancellation, as Netty does.

import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public class NettyBench {
    static final long SEED = 20261121L;
    static double scale = 1;

    static long[] uniformNanos(int n, double lo, double hi) {
        Random r = new Random(SEED);
        long[] d = new long[n];
        for (int i = 0; i < n; i++) d[i] = (long) ((lo + r.nextDouble() * (hi - lo)) * 1e9);
        return d;
    }

    static HashedWheelTimer newTimer() {
        HashedWheelTimer t = new HashedWheelTimer(1, TimeUnit.MILLISECONDS, 512);
        t.start();
        return t;
    }

    static long usedHeap() {
        for (int i = 0; i < 3; i++) System.gc();
        Runtime rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }

    static final TimerTask NOOP = timeout -> { };

    static void churn(HashedWheelTimer timer, long[] delays, Timeout[] hs, int n) {
        for (int i = 0; i < n; i++) hs[i] = timer.newTimeout(NOOP, delays[i], TimeUnit.NANOSECONDS);
        for (int i = 0; i < n; i++) hs[i].cancel();
    }

    static String w1() {
        int n = (int) (1000000 * scale);
        long[] delays = uniformNanos(n, 1, 60);
        Timeout[] hs = new Timeout[n];
        HashedWheelTimer timer = newTimer();
        for (int r = 0; r < 5; r++) churn(timer, delays, hs, Math.min(n, 200000)); // JIT warm-up
        long before = usedHeap();
        for (int i = 0; i < n; i++) hs[i] = timer.newTimeout(NOOP, delays[i], TimeUnit.NANOSECONDS);
        double bytes = (double) (usedHeap() - before) / n;
        for (int i = 0; i < n; i++) hs[i].cancel();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) hs[i] = timer.newTimeout(NOOP, delays[i], TimeUnit.NANOSECONDS);
        long t1 = System.nanoTime();
        for (int i = 0; i < n; i++) hs[i].cancel();
        long t2 = System.nanoTime();
        timer.stop();
        return String.format("schedule_ns=%.1f cancel_ns=%.1f bytes=%.1f",
                (t1 - t0) / (double) n, (t2 - t1) / (double) n, bytes);
    }

    static String lateness(double[] late) throws Exception {
        Arrays.sort(late);
        String out = System.getenv("HWT_BENCH_OUT");
        if (out != null) {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i <= 1000; i++) sb.append(String.format("%.5f %.4f%n", q(late, i / 1000.0), i / 10.0));
            Files.write(Paths.get(out, "w2b_netty.dat"), sb.toString().getBytes());
        }
        return String.format("late_min_ms=%.3f late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f",
                q(late, 0), q(late, 0.5), q(late, 0.99), q(late, 1));
    }

    static double q(double[] s, double p) {
        return s[Math.max(0, (int) Math.ceil(s.length * p) - 1)] * 1000;
    }

    static String w2b() throws Exception {
        int n = (int) (200000 * scale);
        long[] delays = uniformNanos(n, 1, 2);
        double[] late = new double[n];
        AtomicInteger fired = new AtomicInteger();
        HashedWheelTimer timer = newTimer();
        for (int i = 0; i < n; i++) {
            final long due = System.nanoTime() + delays[i];
            timer.newTimeout(t -> late[fired.getAndIncrement()] = (System.nanoTime() - due) / 1e9,
                    delays[i], TimeUnit.NANOSECONDS);
        }
        while (fired.get() < n) Thread.sleep(10);
        timer.stop();
        return lateness(late);
    }

    static String w2c() throws Exception {
        int n = (int) (200000 * scale);
        HashedWheelTimer timer = newTimer();
        AtomicInteger fired = new AtomicInteger();
        long[] firstLast = new long[2];
        long at = System.nanoTime() + 500_000_000L;
        TimerTask cb = t -> {
            int k = fired.incrementAndGet();
            if (k == 1) firstLast[0] = System.nanoTime();
            else if (k == n) firstLast[1] = System.nanoTime();
        };
        for (int i = 0; i < n; i++) timer.newTimeout(cb, at - System.nanoTime(), TimeUnit.NANOSECONDS);
        while (fired.get() < n) Thread.sleep(10);
        timer.stop();
        return String.format("callbacks_per_s=%.0f", (n - 1) / ((firstLast[1] - firstLast[0]) / 1e9));
    }

    static long[] wakeupsAndCpu() throws Exception {
        long total = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                for (String line : Files.readAllLines(t.resolve("status")))
                    if (line.startsWith("voluntary_ctxt_switches:"))
                        total += Long.parseLong(line.split("\\s+")[1]);
            }
        }
        String stat = new String(Files.readAllBytes(Paths.get("/proc/self/stat")));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return new long[] { total, Long.parseLong(f[11]) + Long.parseLong(f[12]) };
    }

    static String w3() throws Exception {
        double window = 5 * Math.min(1, scale * 10);
        HashedWheelTimer timer = newTimer();
        timer.newTimeout(NOOP, 60, TimeUnit.SECONDS);
        Thread.sleep(50);
        long[] a = wakeupsAndCpu();
        long t0 = System.nanoTime();
        Thread.sleep((long) (window * 1000));
        long[] b = wakeupsAndCpu();
        double secs = (System.nanoTime() - t0) / 1e9;
        timer.stop();
        return String.format("wakeups_per_s=%.2f cpu_pct=%.2f threads=%d",
                Math.max(0, b[0] - a[0] - 1) / secs, (b[1] - a[1]) / 100.0 / secs * 100,
                Thread.activeCount());
    }

    // W4's pairs k = from .. from + n - 1: cancel the oldest, schedule one; ns a pair.
    static double pairPass(HashedWheelTimer timer, Timeout[] hs, long[] delays, int p, int from, int n) {
        long t0 = System.nanoTime();
        for (int k = from; k < from + n; k++) {
            hs[k].cancel();
            hs[p + k] = timer.newTimeout(NOOP, delays[p + k], TimeUnit.NANOSECONDS);
            hs[k] = null;
        }
        return (System.nanoTime() - t0) / (double) n;
    }

    static String w4() {
        double[] sizes = scale >= 1 ? new double[] { 1e3, 1e5, 1e6, 4e6 } : new double[] { 1e3, 1e4, 1e5 };
        int pairs = (int) (200000 * Math.min(1, scale * 5));
        StringBuilder sb = new StringBuilder();
        HashedWheelTimer timer = newTimer();
        churn(timer, uniformNanos(200000, 1, 60), new Timeout[200000], 200000); // warm-up
        for (double pd : sizes) { // two passes of pairs, as bench/run.lua's W4: the second is the figure
            int p = (int) pd;
            long[] delays = uniformNanos(p + 2 * pairs, 1, 60);
            Timeout[] hs = new Timeout[p + 2 * pairs];
            for (int i = 0; i < p; i++) hs[i] = timer.newTimeout(NOOP, delays[i], TimeUnit.NANOSECONDS);
            double cold = pairPass(timer, hs, delays, p, 0, pairs);
            System.gc();
            double warm = pairPass(timer, hs, delays, p, pairs, pairs);
            for (int i = 2 * pairs; i < p + 2 * pairs; i++) hs[i].cancel();
            sb.append(String.format("pair_ns_%d=%.1f pair_cold_ns_%d=%.1f ", p, warm, p, cold));
        }
        timer.stop();
        return sb.toString().trim();
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 1) scale = Double.parseDouble(args[1]);
        String r;
        switch (args[0]) {
            case "w1": r = w1(); break;
            case "w2b": r = w2b(); break;
            case "w2c": r = w2c(); break;
            case "w3": r = w3(); break;
            case "w4": r = w4(); break;
            default: throw new IllegalArgumentException("unknown workload " + args[0]);
        }
        System.out.println("system=netty workload=" + args[0] + " " + r);
        System.exit(0);
    }
}
