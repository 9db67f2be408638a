#!/bin/bash
awk '!seen[$0]++' /app/island.txt > /app/unique.txt
