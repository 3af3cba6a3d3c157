# Apache Cassandra for tests/test_cassandra_server.py: cassandra-all and its runtime dependencies from
# Maven Central (tests/peers/cassandra/pom.xml) copied into .cache/cassandra/<version>/lib. Needs java
# and mvn; without them the target says so and the tests skip. 4.1 is not supported on Java 17 upstream
# but runs with the extra --add-opens tests/cassandra_server.py gives it.
CASSANDRA_VERSIONS ?= 5.0.5 4.1.9
CASSANDRA_POM := tests/peers/cassandra/pom.xml
CASSANDRA_CACHE := .cache/cassandra

.PHONY: peers-cassandra

peers-cassandra:
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then \
		for v in $(CASSANDRA_VERSIONS); do \
			test -f $(CASSANDRA_CACHE)/$$v/lib/cassandra-all-$$v.jar && continue; \
			mvn -q -B -Dstyle.color=never -f $(CASSANDRA_POM) dependency:copy-dependencies -Dcassandra.version=$$v \
				-Dlib.dir=$(CURDIR)/$(CASSANDRA_CACHE)/$$v/lib \
				|| echo "peers-cassandra: Maven could not fetch Cassandra $$v; its tests will skip"; \
		done; \
	else echo "peers-cassandra: java or mvn not found; Cassandra server tests will skip"; fi
