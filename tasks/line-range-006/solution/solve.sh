#!/bin/bash
sed -n '11,23p' /app/candle/lucky_bridge.txt > /app/castle_excerpt.txt
