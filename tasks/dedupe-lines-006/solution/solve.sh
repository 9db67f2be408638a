#!/bin/bash
awk '!seen[$0]++' /app/canyon.txt > /app/unique.txt
