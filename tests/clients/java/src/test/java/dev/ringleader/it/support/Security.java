package dev.ringleader.it.support;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;

/**
 * Brokers with security for the security tests, both kinds with the same settings: the certificates of
 * scripts/gen-test-certs.sh and the broker keys of scripts/security-config.sh (one source for the Python and Java
 * tests), listeners PLAINTEXT (setup; User:ANONYMOUS is a super user), SSL, SASL_SSL and SASL_PLAINTEXT.
 * Client configs are built here once and used unchanged against either broker.
 */
public final class Security {
    private Security() {}

    public static final List<String> LISTENERS = List.of("SSL", "SASL_SSL", "SASL_PLAINTEXT");
    /** SCRAM users created by {@link #createScramUsers} (both mechanisms); PLAIN has the same in its JAAS entry. */
    public static final Map<String, String> PASSWORDS = Map.of("alice", "alice-secret", "bob", "bob-secret",
            "admin", "admin-secret");

    private static Path certs;

    /** The certificates, made once per JVM under target/java-tests. */
    public static synchronized Path certs() {
        if (certs == null) {
            Path dir = Repo.scratch("certs");
            ReferenceKafka.ToolResult r = ReferenceKafka.ToolResult.run(
                    List.of("bash", Repo.root().resolve("scripts/gen-test-certs.sh").toString(), dir.toString()), 60);
            if (r.exitCode() != 0) {
                throw new IllegalStateException("gen-test-certs.sh failed:\n" + r.stdout() + r.stderr());
            }
            certs = dir;
        }
        return certs;
    }

    /** scripts/security-config.sh's key=value lines, followed by `extra`. */
    public static String[] brokerSets(String... extra) {
        ReferenceKafka.ToolResult r = ReferenceKafka.ToolResult.run(
                List.of("bash", Repo.root().resolve("scripts/security-config.sh").toString(), certs().toString()), 30);
        if (r.exitCode() != 0) {
            throw new IllegalStateException("security-config.sh failed:\n" + r.stdout() + r.stderr());
        }
        List<String> sets = new ArrayList<>(r.stdout().lines().filter(l -> !l.isBlank()).toList());
        sets.addAll(List.of(extra));
        return sets.toArray(String[]::new);
    }

    public static Broker start(String kind, String name, String... extra) {
        String[] sets = brokerSets(extra);
        return switch (kind) {
            case "kafka" -> ReferenceKafka.start(name, List.of(), LISTENERS, sets);
            case "ringleader" -> RingleaderBroker.startWithListeners(name, LISTENERS, sets);
            default -> throw new IllegalArgumentException(kind);
        };
    }

    /** A broker ready for SASL clients: SCRAM-SHA-256 and -512 credentials for every user of {@link #PASSWORDS}. */
    public static Broker startWithUsers(String kind, String name, String... extra) throws Exception {
        Broker b = start(kind, name, extra);
        try (Admin a = Clients.admin(b)) {
            createScramUsers(a);
        }
        return b;
    }

    /**
     * AlterUserScramCredentials as a super user, one request per mechanism (Kafka answers DUPLICATE_RESOURCE to a
     * user altered twice in one request), then waits until DescribeUserScramCredentials shows them: on Kafka they
     * reach the broker through the metadata log a moment after the controller answered.
     */
    public static void createScramUsers(Admin a) throws Exception {
        for (ScramMechanism m : List.of(ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)) {
            List<UserScramCredentialAlteration> ups = new ArrayList<>();
            PASSWORDS.forEach((u, pw) -> ups.add(new UserScramCredentialUpsertion(u, new ScramCredentialInfo(m, 4096), pw)));
            a.alterUserScramCredentials(ups).all().get(30, TimeUnit.SECONDS);
        }
        Clients.waitUntil(Duration.ofSeconds(30), "the SCRAM users to be visible", () -> {
            try {
                Map<String, UserScramCredentialsDescription> d = a.describeUserScramCredentials(
                        List.copyOf(PASSWORDS.keySet())).all().get(10, TimeUnit.SECONDS);
                return PASSWORDS.keySet().stream().allMatch(u -> d.containsKey(u)
                        && d.get(u).credentialInfos().size() == 2);
            } catch (Exception notYet) {
                return false;
            }
        });
    }

    /**
     * Client settings for `user` over `listener` (SASL_SSL or SASL_PLAINTEXT) with `mechanism` (PLAIN,
     * SCRAM-SHA-256, SCRAM-SHA-512): bootstrap, security.protocol, sasl.* and, for SASL_SSL, the PEM truststore with
     * host-name verification on (the server certificate names 127.0.0.1).
     */
    public static Properties sasl(Broker b, String listener, String mechanism, String user, String password) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, b.listener(listener));
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, listener);
        p.put(SaslConfigs.SASL_MECHANISM, mechanism);
        String module = mechanism.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put(SaslConfigs.SASL_JAAS_CONFIG, module + " required username=\"" + user + "\" password=\"" + password + "\";");
        if (listener.equals("SASL_SSL")) {
            p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
            p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, certs().resolve("ca.pem").toString());
            p.put(SslConfigs.SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG, "https");
        }
        return p;
    }

    public static Properties sasl(Broker b, String listener, String mechanism, String user) {
        return sasl(b, listener, mechanism, user, PASSWORDS.get(user));
    }

    /** An Admin with `security` (from {@link #sasl}) and the bounded timeouts of {@link Clients#admin}. */
    public static Admin admin(Properties security, String clientId) {
        Properties p = new Properties();
        p.putAll(security);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return Admin.create(p);
    }

    /** {@link Clients#consumerProps} with `security` on top (bootstrap included). */
    public static Properties consumer(Broker b, Properties security, String group, String protocol) {
        Properties p = Clients.consumerProps(b, group, protocol);
        p.putAll(security);
        return p;
    }
}
