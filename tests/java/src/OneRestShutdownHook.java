import java.lang.reflect.Field;
import java.util.Arrays;

import org.eclipse.jetty.util.thread.ShutdownThread;

/**
 * Runs a Kafka Connect entry point (ConnectDistributed, MirrorMaker) with one JVM shutdown hook
 * for its REST server instead of two.
 *
 * Connect's own hook stops its Jetty server (RestServer.stop: stop, join, destroy), and the
 * server also asks Jetty for a hook of its own (setStopAtShutdown). On SIGTERM both run at once.
 * Usually Jetty's stops the server first and Connect's finds it stopped. When Connect's gets
 * there first, Jetty's sees a server no longer "started", skips the stop and destroys it while
 * Connect's is still stopping it ("Unable to destroy ... IllegalStateException: STARTED"): the
 * destroyed server forgets its thread pool before stopping it, Connect's join() waits for that
 * pool for ever, and the JVM never exits. Marking Jetty's hook as already installed keeps it
 * from being added; Connect's hook still stops the server.
 *
 * Usage: java OneRestShutdownHook <main class> [args...]
 */
public final class OneRestShutdownHook {
    private OneRestShutdownHook() {
    }

    public static void main(String[] args) throws Exception {
        Field hooked = ShutdownThread.class.getDeclaredField("_hooked");
        hooked.setAccessible(true);
        hooked.setBoolean(ShutdownThread.getInstance(), true);
        Class.forName(args[0]).getMethod("main", String[].class)
            .invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
    }
}
