#!/bin/bash
mkdir -p /app/dragon && tar xzf /app/bright-clover.tar.gz -C /app/dragon
grep '^license=' /app/dragon/harp/moss/gentle_pebble.ini | cut -d= -f2 > /app/value.txt
