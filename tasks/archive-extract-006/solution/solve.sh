#!/bin/bash
mkdir -p /app/raven && tar xzf /app/rustic-reef.tar.gz -C /app/raven
grep '^secret=' /app/raven/bell/lily/snowy_acorn.ini | cut -d= -f2 > /app/otter_value.txt
