"""Which image names nobody else can pull: `localhost/...`, or a single name that is not an
official Docker Hub image (`tb-base`, `my-task-env:latest`)."""

from __future__ import annotations

# Official Docker Hub images (library/...) a task may name without a registry or owner.
_OFFICIAL = """
    alpine almalinux amazoncorretto amazonlinux arangodb archlinux bash buildpack-deps busybox
    caddy cassandra centos chronograf clearlinux clojure composer consul couchbase couchdb
    crate dart debian docker eclipse-mosquitto eclipse-temurin elasticsearch elixir erlang
    fedora flink fluentd gcc gradle golang groovy haproxy haskell hello-world httpd hylang
    ibmjava influxdb irssi jetty jruby julia kapacitor kibana kong liquibase logstash
    mariadb maven memcached mongo mongo-express mono mysql nats neo4j nextcloud nginx node
    odoo open-liberty openjdk oraclelinux orientdb percona perl photon php php-zendserver
    phpmyadmin postgres pypy python r-base rabbitmq redis redmine registry rethinkdb
    rockylinux ruby rust sapmachine scratch solr sonarqube spark swift telegraf tomcat tomee
    traefik ubuntu vault wordpress xwiki zookeeper ros gazebo nats-streaming matomo ghost
    drupal joomla mediawiki plone rocket.chat silverpeas znc adminer backdrop bonita
    convertigo friendica geonetwork lightstreamer nuxeo postfixadmin teamspeak yourls
    emqx ibm-semeru-runtimes mageia sl storm unit varnish websphere-liberty
    """
OFFICIAL_IMAGES = frozenset(_OFFICIAL.split())


def local_only_image(image: str) -> tuple[bool, float]:
    """(True, confidence) when no registry can serve `image`."""
    if not image or "$" in image or image == "scratch":
        return False, 0.0
    name = image.split("@", 1)[0]
    first = name.split("/", 1)[0]
    if first in ("localhost",) or first.startswith("localhost:"):
        return True, 0.7
    if "/" in name:
        return False, 0.0  # owner/name or registry/...: may be public
    base = name.split(":", 1)[0].lower()
    if base in OFFICIAL_IMAGES:
        return False, 0.0
    return True, 0.55
