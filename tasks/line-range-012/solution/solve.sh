#!/bin/bash
sed -n '26,29p' /app/castle/swift_feather.txt > /app/excerpt.txt
