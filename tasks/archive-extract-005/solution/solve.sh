#!/bin/bash
mkdir -p /app/hazel && tar xzf /app/eager-ivory.tar.gz -C /app/hazel
grep '^build_id=' /app/hazel/boulder/saffron/rustic_otter.ini | cut -d= -f2 > /app/value.txt
