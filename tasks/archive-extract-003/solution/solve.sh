#!/bin/bash
mkdir -p /app/cliff && tar xzf /app/lively-birch.tar.gz -C /app/cliff
grep '^secret=' /app/cliff/clover/anchor/misty_pebble.ini | cut -d= -f2 > /app/value.txt
