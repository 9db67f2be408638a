#!/bin/bash
awk '!seen[$0]++' /app/nectar.txt > /app/unique.txt
