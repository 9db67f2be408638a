#!/bin/bash
mkdir -p /app/spruce && tar xzf /app/rustic-anchor.tar.gz -C /app/spruce
grep '^secret=' /app/spruce/blossom/planet/hidden_apple.ini | cut -d= -f2 > /app/value.txt
