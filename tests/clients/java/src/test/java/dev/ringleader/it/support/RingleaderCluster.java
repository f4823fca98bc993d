package dev.ringleader.it.support;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Three (or n) `ringleader serve` processes on loopback forming one cluster (docs/replication.md): each its own
 * data directory and client port, all given the same `controller.quorum.voters` (one node-to-node port each) and
 * `cluster.id`. Nodes are numbered from 1, as `node.id` is.
 */
public final class RingleaderCluster implements AutoCloseable {
    private final List<RingleaderBroker> nodes = new ArrayList<>();
    private String name;
    private String voters;
    private String[] sets;

    private RingleaderCluster() {}

    /** Starts `n` nodes; each `key=value` of `sets` is passed to every node as `--set key=value`. */
    public static RingleaderCluster start(String name, int n, String... sets) {
        List<Integer> voterPorts = new ArrayList<>();
        while (voterPorts.size() < n) {
            int p = Repo.freePort();
            if (!voterPorts.contains(p)) {
                voterPorts.add(p);
            }
        }
        String voters = java.util.stream.IntStream.range(0, n)
                .mapToObj(i -> (i + 1) + "@127.0.0.1:" + voterPorts.get(i))
                .collect(Collectors.joining(","));
        RingleaderCluster c = new RingleaderCluster();
        c.name = name;
        c.voters = voters;
        c.sets = sets;
        try {
            for (int i = 0; i < n; i++) {
                List<String> all = new ArrayList<>(List.of(sets));
                all.add("node.id=" + (i + 1));
                all.add("controller.quorum.voters=" + voters);
                all.add("cluster.id=ringleader-java-" + name);
                c.nodes.add(RingleaderBroker.start(name + "-node" + (i + 1), all.toArray(String[]::new)));
            }
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        return c;
    }

    /**
     * Starts node `id` (the next number) to join the running cluster, as docs/replication.md's "Adding a node" does:
     * the same `controller.quorum.voters` and `cluster.id`, and a CONTROLLER listener of its own (its node-to-node
     * address, {@code listener("CONTROLLER")}). It is a node of the cluster once AddRaftVoter added it.
     */
    public RingleaderBroker join(int id) {
        if (id != nodes.size() + 1) {
            throw new IllegalArgumentException("node " + id + " after " + nodes.size() + " nodes");
        }
        List<String> all = new ArrayList<>(List.of(sets));
        all.add("node.id=" + id);
        all.add("controller.quorum.voters=" + voters);
        all.add("cluster.id=ringleader-java-" + name);
        RingleaderBroker b = RingleaderBroker.startWithListeners(name + "-node" + id, List.of("CONTROLLER"),
                all.toArray(String[]::new));
        nodes.add(b);
        return b;
    }

    /** The cluster's `cluster.id`. */
    public String clusterId() {
        return "ringleader-java-" + name;
    }

    /** Node `id` (1-based, as `node.id`). */
    public RingleaderBroker node(int id) {
        return nodes.get(id - 1);
    }

    public List<RingleaderBroker> nodes() {
        return List.copyOf(nodes);
    }

    /** Every node's client address, for bootstrap.servers. */
    public String bootstrap() {
        return nodes.stream().map(RingleaderBroker::bootstrap).collect(Collectors.joining(","));
    }

    /** The nodes' logs' tails, for a failure message. */
    public String tails() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < nodes.size(); i++) {
            sb.append("\n----- node ").append(i + 1).append(" (").append(nodes.get(i).logFile()).append(")\n");
            String t = nodes.get(i).tail();
            sb.append(t.length() > 2000 ? t.substring(t.length() - 2000) : t);
        }
        return sb.toString();
    }

    @Override
    public void close() {
        for (RingleaderBroker b : nodes) {
            if (b.alive()) {
                b.kill();
            }
        }
    }
}
