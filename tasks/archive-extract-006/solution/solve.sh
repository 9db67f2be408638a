#!/bin/bash
mkdir -p /app/raven && tar xzf /app/rustic-reef.tar.gz -C /app/raven
grep '^token=' /app/raven/otter/birch/early_lily.ini | cut -d= -f2 > /app/value.txt
