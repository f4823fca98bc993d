package dev.ringleader.it.support;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.common.message.ApiMessageType;

/**
 * One connection that sends any request at any version, encoded by the Java client's own generated message classes
 * (so the bytes are exactly what Kafka's schemas say, at versions the client itself would not pick), and decodes the
 * response the same way. A closed connection is an outcome too: Kafka closes it on a request it cannot parse.
 */
public final class RawClient implements AutoCloseable {
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;
    private final String clientId;
    private int correlation;

    public RawClient(Broker b, String clientId) {
        this.clientId = clientId;
        String[] hp = b.bootstrap().split(":");
        try {
            socket = new Socket();
            socket.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 10_000);
            socket.setSoTimeout(30_000);
            socket.setTcpNoDelay(true);
            in = new DataInputStream(socket.getInputStream());
            out = socket.getOutputStream();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Thrown when the broker closes the connection instead of answering. */
    public static final class Closed extends RuntimeException {
        Closed(String what) {
            super(what);
        }
    }

    /** Sends `body` as version `version` of its API and returns the decoded response. */
    @SuppressWarnings("unchecked")
    public <T extends ApiMessage> T call(ApiMessage body, short version) {
        send(body, version);
        return (T) receive(ApiKeys.forId(body.apiKey()), version);
    }

    public int send(ApiMessage body, short version) {
        ApiKeys key = ApiKeys.forId(body.apiKey());
        short headerVersion = key.requestHeaderVersion(version);
        RequestHeaderData header = new RequestHeaderData()
                .setRequestApiKey(key.id)
                .setRequestApiVersion(version)
                .setCorrelationId(++correlation)
                .setClientId(clientId);
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = header.size(cache, headerVersion) + body.size(cache, version);
        ByteBuffer buf = ByteBuffer.allocate(4 + size);
        buf.putInt(size);
        ByteBufferAccessor acc = new ByteBufferAccessor(buf);
        header.write(acc, cache, headerVersion);
        body.write(acc, cache, version);
        try {
            out.write(buf.array());
            out.flush();
        } catch (IOException e) {
            throw new Closed("send failed: " + e.getMessage());
        }
        return correlation;
    }

    public ApiMessage receive(ApiKeys key, short version) {
        byte[] payload;
        try {
            int size = in.readInt();
            if (size < 0 || size > 64 << 20) {
                throw new IllegalStateException("implausible response size " + size);
            }
            payload = new byte[size];
            in.readFully(payload);
        } catch (EOFException | SocketException e) {
            throw new Closed("connection closed");
        } catch (SocketTimeoutException e) {
            throw new IllegalStateException("no response to " + key + " v" + version + " within 30 s");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ByteBuffer buf = ByteBuffer.wrap(payload);
        ResponseHeader header = ResponseHeader.parse(buf, key.responseHeaderVersion(version));
        if (header.correlationId() != correlation) {
            throw new IllegalStateException("correlation id " + header.correlationId() + ", expected " + correlation);
        }
        ApiMessage resp = ApiMessageType.fromApiKey(key.id).newResponse();
        resp.read(new ByteBufferAccessor(buf), version);
        return resp;
    }

    /** True if the broker closed the connection (waits up to `ms`). */
    public boolean closedWithin(int ms) {
        try {
            socket.setSoTimeout(ms);
            return in.read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            return true;
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing
        }
    }
}
