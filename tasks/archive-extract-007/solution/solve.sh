#!/bin/bash
mkdir -p /app/spruce && tar xzf /app/rustic-anchor.tar.gz -C /app/spruce
grep '^license=' /app/spruce/drum/dragon/bold_jungle.ini | cut -d= -f2 > /app/blossom_value.txt
