#!/bin/bash
awk '!seen[$0]++' /app/pine.txt > /app/beacon_unique.txt
