#!/bin/bash
mkdir -p /app/cliff && tar xzf /app/lively-birch.tar.gz -C /app/cliff
grep '^token=' /app/cliff/ember/goblet/sleepy_dragon.ini | cut -d= -f2 > /app/clover_value.txt
