#!/bin/bash
mkdir -p /app/dragon && tar xzf /app/bright-clover.tar.gz -C /app/dragon
grep '^api_key=' /app/dragon/harp/pebble/crimson_reef.ini | cut -d= -f2 > /app/harp_value.txt
