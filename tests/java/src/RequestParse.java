import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.requests.AbstractRequest;

/**
 * Kafka's own request parser (the generated *RequestData.read) as an oracle for Samsa's
 * decoding tests: what the broker's SocketServer accepts or closes the connection for.
 *
 * <pre>java RequestParse &lt; lines</pre>
 * Each input line is "API_KEY VERSION HEX_OF_BODY" (the body after the request header). Each
 * output line is "ok", "unsupported" (Kafka has no such API or version) or "error MESSAGE" (the
 * innermost cause's message: the parse failure Kafka closes the connection for).
 */
public final class RequestParse {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", -1);
            out.append(parse(Short.parseShort(parts[0]), Short.parseShort(parts[1]),
                             HexFormat.of().parseHex(parts[2]))).append('\n');
        }
        System.out.print(out);
    }

    private static String parse(short apiKey, short version, byte[] body) {
        if (!ApiKeys.hasId(apiKey)) {
            return "unsupported";
        }
        ApiKeys api = ApiKeys.forId(apiKey);
        if (version < api.oldestVersion() || version > api.latestVersion(true)) {
            return "unsupported";
        }
        try {
            AbstractRequest.parseRequest(api, version, new ByteBufferAccessor(ByteBuffer.wrap(body)));
            return "ok";
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            return "error " + String.valueOf(cause.getMessage()).replace('\n', ' ');
        }
    }
}
