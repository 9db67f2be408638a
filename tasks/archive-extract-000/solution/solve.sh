#!/bin/bash
mkdir -p /app/topaz && tar xzf /app/lively-cabin.tar.gz -C /app/topaz
grep '^build_id=' /app/topaz/birch/prism/keen_cactus.ini | cut -d= -f2 > /app/value.txt
