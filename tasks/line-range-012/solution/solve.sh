#!/bin/bash
sed -n '21,23p' /app/castle/swift_feather.txt > /app/oak_excerpt.txt
