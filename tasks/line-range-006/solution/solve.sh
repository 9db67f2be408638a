#!/bin/bash
sed -n '13,16p' /app/candle/lucky_bridge.txt > /app/excerpt.txt
