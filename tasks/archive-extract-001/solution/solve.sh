#!/bin/bash
mkdir -p /app/birch && tar xzf /app/fuzzy-canyon.tar.gz -C /app/birch
grep '^license=' /app/birch/velvet/beacon/amber_castle.ini | cut -d= -f2 > /app/value.txt
