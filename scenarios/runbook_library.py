# ruff: noqa: E501  (runbook steps are long prose lines)
"""The runbook library every generated scenario carries in its `runbooks/` folder.

doc_id -> (title, tags, Markdown text). `generate.py` writes each as `runbooks/<doc_id>.md`
with front matter.
"""

from __future__ import annotations

RUNBOOKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "rb-payment-db-credential-rotation": (
        "Rotate the payment-db credentials",
        ("payment-db", "credentials", "vault", "rotation", "postgres"),
        """
The payment-db (PostgreSQL) application credentials are issued by Vault and must be rotated
every 90 days, after any suspected leak, and when an engineer with access leaves the team.
Rotation is zero-downtime: both the old and the new password stay valid until the old one is
revoked at the end.

1. Open a change ticket in the CHG queue and announce the rotation in #payments-oncall.
2. Create the new credential: `vault write -f database/rotate-role/payment-db-app`.
3. Read it back with `vault read database/creds/payment-db-app` and check that the new user can log in: `psql "host=payment-db.internal user=<new user> dbname=payments" -c 'select 1'`.
4. Restart the consumers one at a time so they pick up the new secret: `kubectl -n shop rollout restart deployment/checkout-service` and `deployment/payment-gateway`.
5. Watch the connection count and the error rate of checkout-service for 15 minutes; roll back by restoring the previous secret version in Vault if errors rise.
6. Revoke the old lease: `vault lease revoke -prefix database/creds/payment-db-app/<old lease>`.
7. Close the change ticket with the new lease id and the time of revocation.

Never paste credentials into tickets or chat. If Vault is unavailable, stop: do not create
database users by hand.
""",
    ),
    "rb-payment-db-failover": (
        "payment-db failover to the standby",
        ("payment-db", "failover", "postgres", "replication", "patroni"),
        """
Use this procedure when the payment-db primary is down or badly degraded and the standby is
healthy. Failover is managed by Patroni; never promote a replica by hand.

1. Confirm the primary is unhealthy: `patronictl -c /etc/patroni.yml list` shows the leader as stopped or lagging.
2. Check replication lag on the standby is below 10 seconds before switching.
3. Run `patronictl -c /etc/patroni.yml failover --candidate payment-db-1` and confirm.
4. Verify that the payment-db service endpoint points at the new leader.
5. Watch checkout-service and payment-gateway error rates; connection errors should stop within a minute.
6. Open an incident ticket to rebuild the old primary as a standby.
""",
    ),
    "rb-db-connection-pool-exhaustion": (
        "Database connection pool exhaustion",
        ("connection pool", "database", "timeouts", "hikari", "pool exhausted"),
        """
Symptoms: requests fail with "connection pool exhausted" or "timed out waiting for a
connection", HTTP 500 rates rise, and latency jumps to the pool's acquisition timeout. The
database itself usually looks healthy: the limit is on the client side.

1. Compare the configured pool size (max connections per pod) with the active connections metric: a pool pinned at its maximum is exhausted.
2. Check recent deploys and configuration changes of the service for a change to the pool size, the acquisition timeout or the replica count.
3. If a change reduced the pool, roll it back or restore the previous pool size; this is the fastest mitigation.
4. Otherwise look for slow queries or leaked connections holding the pool (long transactions in pg_stat_activity).
5. Do not raise the pool above what the database's max_connections allows across all replicas.
""",
    ),
    "rb-oomkilled-crashloop": (
        "OOMKilled pods and CrashLoopBackOff",
        ("oomkilled", "crashloopbackoff", "memory", "restarts", "kubernetes"),
        """
Symptoms: pods restart repeatedly, Kubernetes events show OOMKilled (exit code 137) and
Back-off restarting failed container, and the container's memory working set climbs to its
limit before each restart.

1. List the events of the service's pods and count OOMKilled and BackOff events.
2. Compare the memory working set with the container memory limit; utilization near 100% before each kill confirms the limit is too low.
3. Check recent deploys for a change to memory limits or requests, JVM heap flags or a new memory-hungry feature.
4. Mitigate by restoring the previous memory limit (or rolling back the deploy) so pods can start and serve traffic.
5. Only then investigate a genuine memory leak with a heap dump from a canary pod.
""",
    ),
    "rb-dependency-latency": (
        "Latency caused by a slow downstream dependency",
        ("latency", "timeouts", "dependency", "downstream", "retries", "circuit breaker"),
        """
Symptoms: a service's p99 latency and timeouts rise while its own CPU and memory look normal;
its logs show calls to another service timing out and being retried.

1. Find the dependency named in the timeout messages and compare its latency with its baseline.
2. If the dependency is slow, page its owners; check its own upstreams (third-party APIs, databases).
3. Reduce the blast radius: lower retry counts, shorten timeouts, or open the circuit breaker for the dependency so callers fail fast.
4. Do not roll back unrelated deploys of other services unless the timing and the error messages point to them.
5. After recovery, review timeout and retry budgets so retries do not multiply load on a slow dependency.
""",
    ),
    "rb-tls-certificate-renewal": (
        "Expired or expiring TLS certificates (cert-manager)",
        ("tls", "x509", "certificate", "expired", "cert-manager", "acme"),
        """
Symptoms: clients fail with "x509: certificate has expired or is not yet valid", servers log
"TLS handshake error ... bad certificate", and cert-manager events show failed renewals.

1. Check the certificate's expiry: `kubectl -n <ns> get certificate <name> -o wide` and `openssl s_client -connect <host>:443 | openssl x509 -noout -enddate`.
2. Read the cert-manager events for the Certificate to see why renewal failed (ACME challenge, DNS record, rate limits).
3. Fix the cause (for DNS-01: restore the _acme-challenge TXT record permissions), then force renewal with `cmctl renew <name> -n <ns>`.
4. As an emergency measure, install a manually issued certificate from the internal CA into the secret.
5. Restart clients that cache TLS sessions if errors continue after the new certificate is served.
""",
    ),
    "rb-deploy-rollback": (
        "Rolling back a deployment",
        ("rollback", "deploy", "release", "argo", "kubernetes"),
        """
Roll back when a deploy is the likely trigger of an incident: the failures begin shortly after
the rollout and the service that changed is the one failing (or is named in its errors).

1. Find the previous version in the deployment history: `kubectl -n shop rollout history deployment/<service>`.
2. Roll back: `kubectl -n shop rollout undo deployment/<service>` (or revert the commit in the GitOps repository and let Argo CD sync).
3. Watch the error rate and latency for 10 minutes.
4. Freeze further deploys of the service until the cause is understood.
""",
    ),
    "rb-high-5xx-triage": (
        "Triage of elevated HTTP 5xx error rates",
        ("5xx", "http 500", "errors", "triage", "error rate"),
        """
First steps when a service returns more HTTP 500 responses than usual.

1. Search the service's ERROR logs for the most frequent messages and when they started.
2. Check deploys and configuration changes of the service shortly before the onset.
3. Check the service's dependencies named in the error messages (databases, caches, other services).
4. Look at firing alerts for the service and its dependencies.
5. Mitigate first (rollback, failover, feature flag), then find the cause.
""",
    ),
    "rb-kafka-consumer-lag": (
        "Kafka consumer lag",
        ("kafka", "consumer lag", "partitions", "rebalance"),
        """
Symptoms: consumer lag grows on a topic, downstream data is late.

1. Check consumer group lag per partition with `kafka-consumer-groups --describe --group <group>`.
2. Look for rebalances and poison messages in the consumer logs.
3. Scale consumers up to the partition count if throughput is the problem.
4. Skip or dead-letter a poison message only with the owning team's approval.
""",
    ),
    "rb-node-disk-pressure": (
        "Node disk pressure and pod evictions",
        ("disk pressure", "evicted", "node", "ephemeral storage"),
        """
Symptoms: pods are Evicted with "The node was low on resource: ephemeral-storage", nodes report
DiskPressure.

1. Find the node and the pods using the most ephemeral storage.
2. Clean up unused images with the node maintenance job.
3. Set ephemeral-storage limits on the offending pods.
""",
    ),
    "rb-redis-timeouts": (
        "Redis timeouts in cart-service",
        ("redis", "timeouts", "cart-service", "cache"),
        """
Symptoms: cart-service logs "redis GET ... timed out after 50 ms".

1. Sporadic timeouts (a few per hour) are normal background noise and need no action.
2. If they exceed 1% of requests, check Redis CPU, memory and slow log.
3. Failover the Redis primary only if it is unresponsive.
""",
    ),
}
